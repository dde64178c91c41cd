"""One document's stack: a temporary copy of the repository in which its shell blocks run, as a
user runs them from a clone, and the servers its blocks leave running.

The copy holds the working tree's files (``git ls-files``: tracked and new, not ignored), so a
relative path in a block or in a settings file resolves as it does for a user, and nothing a
block writes (``.data``, ``.devhost``, ``local.settings.json``) touches the repository. It stands
for a clone on which ``make venv`` has run: the venvs and ``harness/emulators/node_modules`` are links to
the repository's, the compiled protocol is copied, and no copied file is newer than the venv's
stamp, so make does not rebuild the shared venv from a copy.

Blocks run with the environment a user's shell has: the test run's own variables are left out
(``LOCAL_SETTINGS_FILE``, which ``tests/conftest.py`` empties, and pytest's), so ``make run`` and
``ops`` read the copy's ``local.settings.json`` as they would. The documented servers listen on
fixed ports (7069, 7071, 7081), so a document that starts one holds ``PORTS_LOCK`` until its
servers stop: two documents (or another test that runs ``make run`` as it ships, taking the same
lock) never share them.
"""

import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO

from adapters.local_settings import SETTINGS_FILE_VARIABLE
from tests.docs.shell_blocks import Service, ShellBlock, Step, matches

ROOT = Path(__file__).resolve().parents[2]
LINKED = (".venv", ".venv-bicep", ".venv-checkov", "harness/emulators/node_modules")
GENERATED = ("harness/devhost/protocol/function_rpc_pb2.py", "harness/devhost/protocol/function_rpc_pb2.pyi")
PORTS_LOCK = Path(tempfile.gettempdir()) / "sas-documented-ports.lock"
# A block's own deadline: `make demo` and `ops smoke` (its 120 s wait) are the longest.
BLOCK_TIMEOUT = 600.0
# A server's first start builds the deployment package (its environment is cached).
READY_TIMEOUT = 300.0
STOP_TIMEOUT = 60.0


def user_environment() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if name != SETTINGS_FILE_VARIABLE and not name.startswith(("PYTEST_", "PYTHONPATH"))
    }


def copy_repository(destination: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    stamp = ROOT / ".venv"
    newest = max((p.stat().st_mtime for p in stamp.glob(".installed-*")), default=None)
    for name in [*filter(None, listed.split("\0")), *GENERATED]:
        source = ROOT / name
        if not source.is_file() or (source.is_symlink() and name in LINKED):
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
        if newest is not None and name not in GENERATED and not target.is_symlink():
            mtime = min(source.stat().st_mtime, newest - 1)
            os.utime(target, (mtime, mtime))
    for name in LINKED:
        source = ROOT / name
        if source.exists():
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source.resolve(), target_is_directory=True)


class Server:
    """A documented server, started in its own process group (a terminal of its own), its
    output kept; ready once it prints its service's ``ready`` line."""

    def __init__(self, step: Step, service: Service, cwd: Path, env: dict[str, str]) -> None:
        self.command = step.command
        self.service = service
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.up = False  # it printed its ready line (the event is also set when it ends)
        self.process = subprocess.Popen(
            ["bash", "-c", step.command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self.reader = threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True)
        self.reader.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)
            if self.service.ready.search(line):
                self.up = True
                self.ready.set()
        self.ready.set()  # it ended: wait_ready says so

    def key(self) -> str:
        name = re.search(r"--name\s+(\S+)", self.command)
        return f"{self.service.kind}:{name[1] if name else ''}"

    def wait_ready(self) -> None:
        if not self.ready.wait(READY_TIMEOUT) or not self.up or self.process.poll() is not None:
            raise AssertionError(
                f"`{self.command}` did not start (exit {self.process.poll()}):\n{self.output()}"
            )

    def output(self) -> str:
        return "".join(self.lines[-60:])

    def stop(self) -> None:
        """As Ctrl-C in its terminal: SIGINT to its process group; SIGKILL after a deadline."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.reader.join(STOP_TIMEOUT)


class DocumentStack:
    """Where one document's blocks run, in order; its servers stay up until the next stack or
    the document's end."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="sas-docs-"))
        self.repository = self.directory / "repo"
        copy_repository(self.repository)
        self.env = user_environment()
        self.servers: list[Server] = []
        self.lock: IO[str] | None = None

    def run(self, block: ShellBlock) -> None:
        for step in block.steps:
            if step.service is not None:
                self.start(step, step.service)
            else:
                self.script(step)

    def start(self, step: Step, service: Service) -> None:
        if service.kind == "devhost":
            self.stop_servers()  # a new stack, as a user stops the last one first
        if self.lock is None:
            self.lock = PORTS_LOCK.open("w")
            fcntl.flock(self.lock, fcntl.LOCK_EX)
        server = Server(step, service, self.repository, self.env)
        for running in [s for s in self.servers if s.key() == server.key()]:
            running.stop()  # the same server with other options: it replaces the one running
            self.servers.remove(running)
        self.servers.append(server)
        server.wait_ready()
        if step.expected is not None and not matches(step.expected, server.output()):
            raise AssertionError(
                f"`{step.command}` printed:\n{server.output()}\nnot as shown:\n{step.expected}"
            )

    def script(self, step: Step) -> None:
        try:
            done = subprocess.run(
                ["bash", "-e", "-o", "pipefail", "-c", step.command],
                cwd=self.repository,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=BLOCK_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as timeout:
            raise AssertionError(f"`{step.command}` still running after {BLOCK_TIMEOUT} s") from timeout
        if done.returncode != 0:
            raise AssertionError(
                f"`{step.command}` exited {done.returncode}:\n{done.stdout[-6000:]}{self.servers_output()}"
            )
        if step.expected is not None and not matches(step.expected, done.stdout):
            raise AssertionError(f"`{step.command}` printed:\n{done.stdout}\nnot as shown:\n{step.expected}")

    def servers_output(self) -> str:
        return "".join(f"\n--- `{s.command}` printed:\n{s.output()}" for s in self.servers)

    def stop_servers(self) -> None:
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()
        if self.lock is not None:
            self.lock.close()  # closing the file releases the lock
            self.lock = None

    def close(self) -> None:
        self.stop_servers()
        shutil.rmtree(self.directory, ignore_errors=True)
