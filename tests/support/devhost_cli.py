"""``python -m harness.devhost start`` as a user runs it, for the tests of its start-up errors."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def devhost_start(app_dir: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """Run it to its end: these tests expect it to refuse to start."""
    return subprocess.run(
        [sys.executable, "-m", "harness.devhost", "start", "--app-dir", str(app_dir), *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
