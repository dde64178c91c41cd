"""Crash recovery: devhost killed with SIGKILL at many points of progress, then restarted,
finishes every orchestration with the right result (R11, C12: devhost commits each episode and
each activity result atomically)."""

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from adapters.local_settings import SETTINGS_FILE_VARIABLE
from harness.demo.stack import free_port, wait_for
from tests.support.devhost_sample import SAMPLE_APP

# devhost start, killed and restarted.
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
INSTANCES = 6
STEPS = 4


class Devhost:
    def __init__(self, data_dir: Path, output: Path) -> None:
        self.port = free_port()
        self.data_dir = data_dir
        self.env = {
            **os.environ,
            "SAMPLE_OUTPUT": str(output),
            "PYTHONPATH": str(ROOT),
            SETTINGS_FILE_VARIABLE: str(SAMPLE_APP / "local.settings.json"),
        }
        self.process: subprocess.Popen[str] | None = None
        self.log = data_dir.parent / "devhost.log"

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "harness.devhost",
                    "start",
                    "--app-dir",
                    str(SAMPLE_APP),
                    "--data-dir",
                    str(self.data_dir),
                    "--port",
                    str(self.port),
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=ROOT,
            )
        wait_for(self._answers, "devhost to listen")

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"devhost exited: {self.log.read_text()[-2000:]}")
        try:
            self.get("/api/hello/ping")
            return True
        except OSError:
            return False

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()  # SIGKILL: no clean-up of any kind
        self.process.wait()

    def stop(self) -> int:
        assert self.process is not None
        self.process.terminate()
        return self.process.wait(timeout=30)

    def get(self, path: str) -> tuple[int, object]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def post(self, path: str, body: object) -> int:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)


def _count_records(output: Path) -> int:
    return len(output.read_text().splitlines()) if output.exists() else 0


@pytest.mark.slow
def test_sigkill_at_many_points_then_restart_finishes_every_instance(tmp_path: Path) -> None:
    output = tmp_path / "out.jsonl"
    host = Devhost(tmp_path / "data", output)
    host.start()
    ids = [f"k-{n}" for n in range(INSTANCES)]
    for instance in ids:
        assert host.post(f"/api/start/slow_chain?id={instance}", {"steps": STEPS}) == 202
    total = INSTANCES * STEPS
    # Kill points by progress, spread from the first activity to the last ones.
    for kill_after in (1, 5, 9, 14, 19):
        wait_for(lambda k=kill_after: _count_records(output) >= k, f"{kill_after} activities")
        host.kill()
        host.start()

    def all_completed() -> bool:
        for instance in ids:
            _, status = host.get(f"/runtime/webhooks/durabletask/instances/{instance}")
            assert isinstance(status, dict)
            if status["runtimeStatus"] == "Failed":
                raise AssertionError(f"{instance} failed: {status['output']}")
            if status["runtimeStatus"] != "Completed":
                return False
        return True

    wait_for(all_completed, "every instance to complete")
    for instance in ids:
        _, status = host.get(f"/runtime/webhooks/durabletask/instances/{instance}")
        assert isinstance(status, dict) and status["output"] == STEPS
    records = [json.loads(line) for line in output.read_text().splitlines()]
    done = {(r["instance"], r["step"]) for r in records}
    assert done == {(i, s) for i in ids for s in range(STEPS)}
    assert len(records) >= total  # at-least-once: a killed activity may run twice
    assert host.stop() == 0  # SIGTERM: a clean stop
