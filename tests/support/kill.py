"""A child process SIGKILLed mid-burst: what it acknowledged (printed after each commit) first."""

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_and_kill(script: str, args: list[str], acknowledgements: int) -> list[str]:
    """Run ``script`` with ``args``; kill it once it printed ``acknowledgements`` lines, each
    printed only after its write committed, and return every line it printed."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None
    acknowledged = []
    try:
        for line in child.stdout:
            acknowledged.append(line.strip())
            if len(acknowledged) >= acknowledgements:
                child.send_signal(signal.SIGKILL)  # mid-burst: it is writing or committing now
                break
    finally:
        child.kill()
        child.wait(timeout=30)
    # Whatever it wrote to the pipe before dying counts too: printed means committed.
    acknowledged.extend(line.strip() for line in child.stdout.read().splitlines() if line.strip())
    assert child.returncode == -signal.SIGKILL
    return acknowledged
