"""A second devhost on a port that is taken stops at once with one line that says which port and
how to choose another, and exit code 2 like its other start-up errors (harness/devhost/README.md)."""

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.devhost_cli import devhost_start

pytestmark = pytest.mark.processes  # python -m harness.devhost start

SAMPLE_APP = Path(__file__).parent / "sample_app"


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process listens on, as a first devhost would."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


def test_a_busy_http_port_is_one_line_and_exit_code_2(tmp_path: Path, taken_port: int) -> None:
    result = devhost_start(SAMPLE_APP, "--data-dir", str(tmp_path / "data"), "--port", str(taken_port))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"devhost: port {taken_port} (HTTP) is in use: choose another with --port N or the "
        "DEVHOST_PORT setting (0 picks a free one)"
    ]
    assert result.stdout == ""
