"""Shell completion of ``python -m ops`` (argcomplete): driven as the shell drives it — the
global completion's check that the module opts in, then ``python -m ops`` with the command line
in ``COMP_LINE`` and the completions written where ``_ARGCOMPLETE_STDOUT_FILENAME`` says."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEPARATOR = "\v"  # the IFS argcomplete's shell functions set (\013)


def complete(line: str, tmp_path: Path) -> list[str]:
    out = tmp_path / "completions"
    env = os.environ | {
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE": "3",  # the words before the program's own: python -m ops
        "_ARGCOMPLETE_STDOUT_FILENAME": str(out),
    }
    done = subprocess.run(
        [sys.executable, "-m", "ops"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out.read_text().split(SEPARATOR)


def test_ops_opts_in_to_global_completion() -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "argcomplete._check_module", "ops"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr


def test_a_partial_command_completes_to_the_commands_it_begins(tmp_path: Path) -> None:
    assert sorted(complete("python -m ops s", tmp_path)) == ["schema", "show", "smoke", "status", "submit"]
    assert sorted(complete("python -m ops --json d", tmp_path)) == ["dashboard", "dlq"]


def test_a_commands_options_and_subcommands_complete(tmp_path: Path) -> None:
    after_alerts = complete("python -m ops alerts ", tmp_path)
    assert {"ack", "drain", "list", "--limit", "--azd"} <= set(after_alerts)
    # The only completion comes with the space the shell then types after it.
    assert complete("python -m ops instances --st", tmp_path) == ["--status "]
