"""The README's "Run it by hand", as it ships: ``make run``'s command line on the shipped
``local.settings.embedded.json`` (copied as ``local.settings.json``, as the Makefile does) in a
copy of the repository, so its relative paths are really relative; an order from ``ops submit``
and one over HTTP with a token from ``ops token``; a restart of devhost; both orders still there.

Only the two ports differ from the shipped file (real environment variables win, as in func):
other tests and stacks on this machine may hold 7069 and 7071."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from harness.standins.ports import free_port
from tests.support.app import order_body

# devhost start under the local issuer, and the ops CLI, as child processes.
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
# What the repository holds beside its tracked files once `make venv` has run.
BUILT = ("harness/devhost/protocol/function_rpc_pb2.py", "harness/devhost/protocol/function_rpc_pb2.pyi")
DEADLINE = 90.0


def _copy_repository(target: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for relative in [*filter(None, listed), *BUILT]:
        source = ROOT / relative
        if source.is_file():
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / relative)
    return target


def _run_command() -> list[str]:
    """The embedded profile's `make run` recipe, from the Makefile, with the venv's Python."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^run: .*local\.settings\.json.*\n\t(.+)$", makefile, re.MULTILINE)
    assert recipe is not None, "the Makefile's embedded `run` target has changed"
    return [sys.executable if word == "$(BIN)/python" else word for word in shlex.split(recipe.group(1))]


def _wait(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds, as tests/support/emulators.py waits for a server: tenacity."""
    polling = Retrying(
        stop=stop_after_delay(DEADLINE), wait=wait_fixed(0.2), retry=retry_if_result(lambda ok: not ok)
    )
    try:
        polling(condition)
    except RetryError:
        raise AssertionError(f"not within {DEADLINE:.0f} s: {what}") from None


class RunningStack:
    """`make run` in a terminal: one process group, stopped by Ctrl-C (SIGINT to the group)."""

    def __init__(self, app_dir: Path, env: dict[str, str]) -> None:
        self.output: list[str] = []
        self.started = threading.Event()
        self.process = subprocess.Popen(
            _run_command(),
            cwd=app_dir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            if line.startswith("Host started:"):
                self.started.set()

    def wait_started(self) -> None:
        _wait(lambda: self.started.is_set() or self.process.poll() is not None, "devhost started")
        assert self.started.is_set(), "".join(self.output)

    def stop(self) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout=60)


def test_make_run_keeps_orders_from_ops_and_http_across_a_restart(tmp_path: Path) -> None:
    app_dir = _copy_repository(tmp_path / "repo")
    shutil.copy(app_dir / "local.settings.embedded.json", app_dir / "local.settings.json")
    host_port, issuer_port = free_port(), free_port()
    # The user's shell: no test-suite guard, no settings but the two ports.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SAS_", "DEVHOST_", "LOCAL_"))}
    env |= {"DEVHOST_PORT": str(host_port), "SAS_AUTH_AUTHORITY": f"http://127.0.0.1:{issuer_port}"}

    def ops(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ops", *args]
        return subprocess.run(
            command, cwd=app_dir, env=env, capture_output=True, text=True, timeout=60, check=False
        )

    def found(order_id: str) -> bool:
        return ops("status", order_id).returncode == 0

    stack = RunningStack(app_dir, env)
    try:
        stack.wait_started()
        submitted = ops("submit", "--order-id", "o-1")
        assert submitted.returncode == 0, submitted.stderr
        token = ops("token", "--app", "app-a")
        assert token.returncode == 0, token.stderr
        request = urllib.request.Request(
            f"http://127.0.0.1:{host_port}/api/orders",
            data=order_body("o-2").encode(),
            headers={"Authorization": f"Bearer {token.stdout.strip()}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 202 and json.load(response)["OrderID"] == "o-2"
        _wait(lambda: found("o-1") and found("o-2"), "ops status finds o-1 and o-2")
    finally:
        first = stack.stop()
    assert first == 0, "".join(stack.output)

    restarted = RunningStack(app_dir, env)
    try:
        restarted.wait_started()
        for order_id in ("o-1", "o-2"):
            status = ops("status", order_id)
            assert status.returncode == 0, status.stderr
            assert order_id in status.stdout
    finally:
        restarted.stop()
    # One set of stores, beside the package folder and never in it.
    assert (app_dir / ".data" / "orders.db").exists()
    assert not any((app_dir / ".devhost" / "wwwroot").rglob("*.db"))
