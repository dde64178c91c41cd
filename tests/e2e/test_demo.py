"""``make demo`` at a small size: it exits 0 when the invariants hold, and not when they break."""

import subprocess
import sys
from pathlib import Path

import pytest

# The demo: devhost, agents and the simulator as child processes.
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]


def run_demo(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "demo", "--orders", "24", "--workdir", str(tmp_path / "demo"), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_the_demo_runs_with_chaos_and_every_invariant_holds(tmp_path: Path) -> None:
    result = run_demo(tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "All invariants hold." in result.stdout
    assert "SIGKILL devhost" in result.stdout and "restarted devhost" in result.stdout
    assert "OrderConflict" in result.stdout  # the conflicting re-submission was dead-lettered


@pytest.mark.slow
def test_a_service_that_applies_effects_twice_makes_the_demo_fail(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "--broken-simulator", "--no-chaos", "--lost", "0.3")
    assert result.returncode == 1, result.stdout[-4000:]
    [line] = [row for row in result.stdout.splitlines() if "exactly one effect per step" in row]
    assert "✗" in line
    assert "invariant(s) failed" in result.stdout
