"""Local telemetry survives a kill (adapters/telemetry_files.py): every measurement is on disk
before the call that made it returns, so SIGKILL, which runs no exit hook, loses no count."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Counts, then reports it has counted, then waits to be killed: whatever reaches the file must
# have been written by then, since nothing runs after SIGKILL.
CHILD = """
import sys
from opentelemetry import metrics
from adapters import telemetry_export
counter = metrics.get_meter("t").create_counter("sas.transitions")
telemetry_export.configure("probe")
for n in range(7):
    counter.add(1, {"to_state": "Processed" if n % 2 else "Error"})
print("counted", flush=True)
sys.stdin.read()
"""


def _latest_totals(path: Path) -> dict[str, float]:
    totals: dict[str, float] = {}
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resource_metrics"]:
            for scope in resource["scope_metrics"]:
                for metric in scope["metrics"]:
                    for point in metric["data"]["data_points"]:
                        totals[point["attributes"]["to_state"]] = point["value"]
    return totals


def test_counts_reach_the_file_before_a_kill(tmp_path: Path) -> None:
    env = {**os.environ, "SAS_TELEMETRY_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("APPLICATIONINSIGHTS_CONNECTION_STRING", None)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "counted"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    assert _latest_totals(tmp_path / "probe.metrics.jsonl") == {"Processed": 3, "Error": 4}
