"""Both command-line tools given a broken ``local.settings.json``: exit code 2 and one line that
names the file, never a traceback. Each runs as a person runs it, ``python -m``, in its own
process, so what reaches the terminal is exactly what the test reads."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.local_settings import SETTINGS_FILE_VARIABLE

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
USAGE = 2  # both tools: a bad argument or bad settings


def _run(tool: list[str], settings_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *tool],
        cwd=ROOT,
        env={**os.environ, SETTINGS_FILE_VARIABLE: str(settings_file)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("tool", [["ops", "list"], ["agent_worker"]], ids=["ops", "agent_worker"])
@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"Values": {"SAS_PROFILE": ', "is not valid JSON"),
        ('{"Values": []}', "'Values' must be an object"),
        ('{"Values": {"SAS_MAX_IN_FLIGHT": "many", "AGENT_CONCURRENCY": "many"}}', "invalid settings"),
    ],
    ids=["not-json", "values-not-an-object", "a-value-invalid"],
)
def test_a_malformed_settings_file_is_one_line_and_exit_code_2(
    tool: list[str], content: str, says: str, tmp_path: Path
) -> None:
    settings_file = tmp_path / "local.settings.json"
    settings_file.write_text(content)
    ran = _run(tool, settings_file)
    assert ran.returncode == USAGE, ran.stderr
    assert "Traceback" not in ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1, ran.stderr
    assert lines[0].startswith(f"{tool[0]}: ") and says in lines[0]
