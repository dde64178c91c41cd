"""A second devhost on a port that is taken stops at once with one line that says which port and
how to choose another, and exit code 2 like its other start-up errors (devhost/README.md)."""

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # python -m devhost start

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_APP = Path(__file__).parent / "sample_app"


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process listens on, as a first devhost would."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


def test_a_busy_http_port_is_one_line_and_exit_code_2(tmp_path: Path, taken_port: int) -> None:
    command = ["start", "--app-dir", str(SAMPLE_APP), "--data-dir", str(tmp_path / "data")]
    result = subprocess.run(
        [sys.executable, "-m", "devhost", *command, "--port", str(taken_port)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"devhost: port {taken_port} (HTTP) is in use: choose another with --port N or the "
        "DEVHOST_PORT setting (0 picks a free one)"
    ]
    assert result.stdout == ""
