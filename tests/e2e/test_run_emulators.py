"""``make run PROFILE=emulators`` (``python -m harness.demo.emulators``): one command brings up the Cosmos DB
server, Azurite, the schema, the settings, a simulator, an agent and devhost, and an order made
with ``ops smoke`` from another process, with the settings it printed, completes."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from adapters.local_settings import SETTINGS_FILE_VARIABLE
from harness.demo.stack import wait_for

# python -m harness.demo.emulators starts the Cosmos DB server and Azurite (make emulators).
pytestmark = [pytest.mark.processes, pytest.mark.emulators]

ROOT = Path(__file__).resolve().parents[2]


def test_one_command_runs_the_emulators_profile_and_an_order_completes(tmp_path: Path) -> None:
    workdir = tmp_path / "emulators"
    runner = subprocess.Popen(
        [sys.executable, "-m", "harness.demo.emulators", "--workdir", str(workdir), "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    assert runner.stdout is not None
    reader = threading.Thread(target=lambda: output.extend(iter(runner.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_for(
            lambda: any("Host started" in line for line in output) or runner.poll() is not None, "devhost"
        )
        assert runner.poll() is None, "".join(output)[-3000:]
        assert any("orders schema: created table Orders" in line for line in output)
        settings_file = workdir / "local.settings.json"
        values = json.loads(settings_file.read_text())["Values"]
        assert values["SAS_PROFILE"] == "emulators"
        smoke = subprocess.run(
            [sys.executable, "-m", "ops", "smoke", "--timeout", "90", "--interval", "0.2"],
            cwd=ROOT,
            env={**os.environ, SETTINGS_FILE_VARIABLE: str(settings_file)},
            capture_output=True,
            text=True,
            timeout=150,
            check=False,
        )
        assert smoke.returncode == 0, smoke.stdout + smoke.stderr + "".join(output)[-3000:]
        assert "Status=completed" in smoke.stdout
    finally:
        runner.send_signal(signal.SIGTERM)
        code = runner.wait(timeout=90)
        reader.join(timeout=10)
    assert code == 0, "".join(output)[-3000:]
    # The emulators went with it.
    port = int(re.search(r"127\.0\.0\.1:(\d+)/", values["CosmosDBConnection"]).group(1))  # type: ignore[union-attr]
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
