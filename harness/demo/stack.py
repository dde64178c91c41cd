"""The whole embedded stack as real processes: devhost running function_app.py, agent worker
processes and the simulator, on loopback, on the real clock.

Used by `make demo` and the end-to-end tests. Settings go through the environment, and no
``local.settings.json`` is read (``LOCAL_SETTINGS_FILE`` empty), so runs are isolated in a work dir.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.clock import SystemClock
from adapters.local_settings import SETTINGS_FILE_VARIABLE
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.sqlite.state_store import SqliteStateStore
from bootstrap import build_ports
from domain.messages import QueuedOrder
from domain.record import StateRecord
from domain.states import TERMINAL_STATES
from harness.standins.local_issuer import from_settings
from harness.standins.ports import free_port
from ops.tokens import app_token
from services.context import Ports
from settings import Settings

ROOT = Path(__file__).resolve().parents[2]

# Fast timings so that faults resolve in seconds; the arithmetic of C2 still holds.
FAST = {
    "SAS_STEP_TIMEOUT_SECONDS": "4",
    "SAS_START_GRACE_SECONDS": "4",
    "SAS_COOLDOWN_SECONDS": "3",
    "SAS_COSMOS_THROTTLE_MAX_WAIT_SECONDS": "2",
    "SAS_RETRY_BUDGET_SECONDS": "2",
    "SAS_STARTER_SCHEDULE": "*/1 * * * * *",
    "SAS_SUPERVISOR_SCHEDULE": "*/1 * * * * *",
    "AGENT_BACKOFF_INITIAL_SECONDS": "0.05",
    "AGENT_BACKOFF_MAX_SECONDS": "0.5",
    "AGENT_CALL_TIMEOUT_SECONDS": "1.5",
    "AGENT_BREAKER_RECOVERY_SECONDS": "1",
    "AGENT_POLL_INTERVAL_SECONDS": "0.02",
}


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    """Poll a condition with a deadline: these processes run on the real clock."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        pause.wait(0.05)


def http_json(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


class Stack:
    def __init__(
        self,
        workdir: Path,
        *,
        agents: int = 2,
        profile: dict[str, Any] | None = None,
        settings: dict[str, str] | None = None,
        devhost_flags: tuple[str, ...] = (),
    ) -> None:
        self.workdir = workdir
        self.devhost_flags = devhost_flags
        self.agents = agents
        self.profile = profile or {}
        self.simulator_port = free_port()
        self.devhost_port = free_port()
        values = json.loads((ROOT / "local.settings.embedded.json").read_text())["Values"]
        self.env = {
            **os.environ,
            **values,
            **FAST,
            "PYTHONPATH": str(ROOT),
            "SAS_DATA_DIR": str(workdir / "data"),
            "DEVHOST_DATA_DIR": str(workdir / "devhost"),
            "LOCAL_SERVICEBUS_PATH": str(workdir / "servicebus.db"),
            "AGENT_REMOTE_URL": f"http://127.0.0.1:{self.simulator_port}",
            "SAS_TELEMETRY_DIR": str(workdir / "telemetry"),
            # No settings file: the run is the work dir's alone, whatever the repo root holds.
            SETTINGS_FILE_VARIABLE: "",
            **(settings or {}),
        }
        # The Entra stand-in the front end verifies tokens against, up before devhost reads its URL.
        self.issuer = from_settings(self.env, port=0)
        self.env |= self.issuer.settings()
        self.processes: dict[str, subprocess.Popen[str]] = {}
        self._ports: Ports | None = None

    # --- processes ------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.workdir / f"{name}.log").open("a")
        self.processes[name] = subprocess.Popen(
            [sys.executable, *args], env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, text=True
        )

    def start(self) -> "Stack":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.issuer.start()
        self.start_simulator()
        self.start_devhost()
        for n in range(self.agents):
            self.start_agent(f"agent-{n}")
        return self

    def start_simulator(self) -> None:
        self._spawn(
            "simulator",
            [
                "-m",
                "simulator",
                "--port",
                str(self.simulator_port),
                "--ledger",
                str(self.workdir / "ledger.db"),
                "--profile",
                json.dumps(self.profile),
            ],
        )
        wait_for(lambda: self._answers(f"{self.simulator_url}/health", "simulator"), "the simulator")

    def start_devhost(self) -> None:
        self._spawn(
            "devhost",
            [
                "-m",
                "harness.devhost",
                "start",
                "--app-dir",
                str(ROOT),
                "--port",
                str(self.devhost_port),
                *self.devhost_flags,
            ],
        )
        wait_for(
            lambda: self._answers(f"{self.devhost_url}/runtime/webhooks/durabletask/instances/", "devhost"),
            "devhost",
        )

    def start_dashboard(self) -> str:
        """The operator's page (``python -m ops dashboard``) over this stack's stores and telemetry;
        stopped with the rest of the stack."""
        port = free_port()
        self._spawn("dashboard", ["-m", "ops", "--app-dir", str(ROOT), "dashboard", "--port", str(port)])
        url = f"http://127.0.0.1:{port}/"
        wait_for(lambda: self._answers(f"{url}api/summary", "dashboard"), "the dashboard")
        return url

    def start_agent(self, name: str) -> None:
        self._spawn(name, ["-m", "agent_worker", "--app-dir", str(ROOT), "--name", name])

    def _answers(self, url: str, name: str) -> bool:
        process = self.processes[name]
        if process.poll() is not None:
            raise AssertionError(f"{name} exited: {(self.workdir / f'{name}.log').read_text()[-3000:]}")
        try:
            return http_json(url)[0] == 200
        except OSError:
            return False

    def kill(self, name: str) -> None:
        process = self.processes.pop(name)
        process.kill()
        process.wait()

    def stop(self) -> dict[str, int]:
        codes = {}
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for name, process in self.processes.items():
            try:
                codes[name] = process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[name] = process.wait()
        self.processes.clear()
        self.issuer.stop()
        return codes

    def token_source(self, app: str) -> Callable[[], str]:
        """How the submitting app ``app`` gets an access token: from the issuer's token endpoint,
        as it would from Entra (``python -m ops token --app NAME`` does the same)."""
        settings = Settings.from_env(self.env)
        return lambda: app_token(settings, app)

    # --- talking to it ----------------------------------------------------------------------

    @property
    def simulator_url(self) -> str:
        return f"http://127.0.0.1:{self.simulator_port}"

    @property
    def devhost_url(self) -> str:
        return f"http://127.0.0.1:{self.devhost_port}"

    def bus(self) -> LocalServiceBus:
        return LocalServiceBus(self.workdir / "servicebus.db")

    def states(self) -> SqliteStateStore:
        return SqliteStateStore(self.workdir / "data" / "state.db")

    def ports(self) -> Ports:
        """The app's own adapters for this stack's profile: its state store and its messaging."""
        if self._ports is None:
            self._ports = build_ports(Settings.from_env(self.env), SystemClock())
        return self._ports

    def submit(self, orders: list[QueuedOrder], message_id: str | None = None) -> None:
        """Straight onto the orders queue, as the front end puts an accepted post there."""
        sender = self.ports().sender
        for order in orders:
            sender.send("orders", order.model_dump_json(), message_id=message_id or order.message_id())

    def records(self, order_ids: list[str]) -> dict[str, StateRecord | None]:
        states = self.ports().states
        return {i: (s.record if (s := states.get(i)) else None) for i in order_ids}

    def wait_terminal(self, order_ids: list[str], timeout: float = 240.0) -> dict[str, StateRecord]:
        waiting = set(order_ids)
        states = self.ports().states

        def done() -> bool:
            for order_id in list(waiting):
                stored = states.get(order_id)
                if stored is not None and stored.record.ProcessState in TERMINAL_STATES:
                    waiting.discard(order_id)
            return not waiting

        wait_for(done, f"{len(order_ids)} orders to finish", timeout)
        return {k: v for k, v in self.records(order_ids).items() if v is not None}

    def ledger(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        status, body = http_json(f"{self.simulator_url}/ledger?prefix={prefix}")
        assert status == 200, body
        keys: dict[str, dict[str, Any]] = body["keys"]
        return keys

    def set_profile(self, profile: dict[str, Any]) -> None:
        status, body = http_json(f"{self.simulator_url}/admin/profile", "PUT", profile)
        assert status == 200, body
