"""The in-repo AMQP test broker (``harness.standins.amqp_broker``) as the tests start it.

``broker_process``: the broker as a separate process with the queues of the repo's
``harness/emulators/servicebus-config/Config.json`` (the ``servicebus_broker`` fixture, one per test
session). ``write_config``: a Config.json with queues of a test's own, for an in-process broker
(the ``servicebus_broker_with`` fixture).
``run_broker_command``: the broker's command run until it exits, for a config it refuses.
"""

import contextlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from harness.standins.amqp_broker import Broker

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "harness" / "emulators" / "servicebus-config" / "Config.json"
READY_TIMEOUT = 20.0

BrokerFactory = Callable[[Mapping[str, Mapping[str, Any]]], "Broker"]


def require_proton() -> None:
    if importlib.util.find_spec("proton") is None:
        pytest.fail(
            "the AMQP test broker needs python-qpid-proton: install requirements-dev.txt (`make test` does)"
        )


@dataclass(frozen=True)
class BrokerProcess:
    pid: int
    port: int

    @property
    def connection_string(self) -> str:
        return (
            f"Endpoint=sb://127.0.0.1:{self.port};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
        )


@contextlib.contextmanager
def broker_process() -> Iterator[BrokerProcess]:
    """The broker as a separate process, as the app and its workers would reach it; stopped on exit."""
    require_proton()
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.standins.amqp_broker", "--config", str(CONFIG), "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT)
    line = process.stdout.readline() if ready else ""
    if not line.startswith("Ready amqp://"):
        process.kill()
        rest = process.communicate(timeout=10)[0]
        pytest.fail(f"the AMQP test broker did not start: {line}{rest}")
    threading.Thread(target=process.stdout.read, daemon=True).start()  # keep its pipe drained
    try:
        yield BrokerProcess(pid=process.pid, port=int(line.strip().rsplit(":", 1)[1]))
    finally:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def write_config(path: Path, queues: Mapping[str, Mapping[str, Any]]) -> Path:
    """A Config.json at ``path`` whose queues are ``{name: Config.json Properties}``."""
    document = {
        "UserConfig": {
            "Namespaces": [
                {
                    "Name": "sbemulatorns",
                    "Queues": [{"Name": name, "Properties": dict(props)} for name, props in queues.items()],
                    "Topics": [],
                }
            ],
            "Logging": {"Type": "File"},
        }
    }
    path.write_text(json.dumps(document))
    return path


def run_broker_command(config: Path) -> subprocess.CompletedProcess[str]:
    """Run the broker's command on ``config`` until it exits (a config it refuses)."""
    return subprocess.run(
        [sys.executable, "-m", "harness.standins.amqp_broker", "--config", str(config), "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
