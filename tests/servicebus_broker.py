"""The in-repo AMQP test broker (``testing.amqp_broker``) as pytest fixtures.

``servicebus_broker``: one broker process per test session (per xdist worker) with the repo's
``servicebus/Config.json`` queues; yields its ``connection_string`` and ``port``.
``servicebus_broker_with``: a factory for an in-process broker with queues of the test's own
(locks and duplicate windows as short as Azure allows), which also offers ``queue_depth`` and
``dead_letter_depth``.
"""

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
    from testing.amqp_broker import Broker

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "servicebus" / "Config.json"
READY_TIMEOUT = 20.0

BrokerFactory = Callable[[Mapping[str, Mapping[str, Any]]], "Broker"]


def _require_proton() -> None:
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


@pytest.fixture(scope="session")
def servicebus_broker() -> Iterator[BrokerProcess]:
    """The broker as a separate process, as the app and its workers would reach it."""
    _require_proton()
    process = subprocess.Popen(
        [sys.executable, "-m", "testing.amqp_broker", "--config", str(CONFIG), "--port", "0"],
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
    yield BrokerProcess(pid=process.pid, port=int(line.strip().rsplit(":", 1)[1]))
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


@pytest.fixture
def servicebus_broker_with(tmp_path: Path) -> Iterator[BrokerFactory]:
    """Start a broker whose queues are ``{name: Config.json Properties}``; stopped after the test."""
    _require_proton()
    from testing.amqp_broker import start_broker  # noqa: PLC0415  # only once proton is known to be there

    started: list[Broker] = []

    def start(queues: Mapping[str, Mapping[str, Any]]) -> "Broker":
        config = tmp_path / f"Config-{len(started)}.json"
        document = {
            "UserConfig": {
                "Namespaces": [
                    {
                        "Name": "sbemulatorns",
                        "Queues": [
                            {"Name": name, "Properties": dict(props)} for name, props in queues.items()
                        ],
                        "Topics": [],
                    }
                ],
                "Logging": {"Type": "File"},
            }
        }
        config.write_text(json.dumps(document))
        broker = start_broker(config)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()
