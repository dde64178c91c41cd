"""What an idle agent costs: CPU of an agent worker process with nothing to do.

    .venv/bin/python -m harness.bench.agent_idle [--seconds 20]

Starts one ``python -m agent_worker`` on a fresh local Service Bus (embedded profile) and an
idle baseline process (``time.sleep``) in the same run, lets both settle, and reports each one's
CPU time over the window from ``/proc/<pid>/stat`` as a share of one core. The agent waits for a
send on the bus (``LocalServiceBus.wait_for_commit``) instead of polling, so its share should stay
near the baseline's: goal at most 2% of a core.
"""

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import QueueConfig

ROOT = Path(__file__).resolve().parents[2]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (devhost's worker processes)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def children_cpu_seconds(pid: int) -> float:
    """CPU seconds so far of the live children of ``pid``."""
    total = 0.0
    for child in children(pid):
        with contextlib.suppress(OSError):  # exited meanwhile
            total += cpu_seconds(child)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bus_path = Path(tmp) / "servicebus.db"
        with LocalServiceBus(bus_path) as bus:
            for queue in ("agent-requests", "agent-replies"):
                bus.declare(QueueConfig(queue))
        env = os.environ | {
            "ServiceBusConnection": "local",
            "LOCAL_SERVICEBUS_PATH": str(bus_path),
            "AGENT_REMOTE_URL": "http://127.0.0.1:9",
        }
        agent = subprocess.Popen([sys.executable, "-m", "agent_worker", "--name", "idle"], cwd=ROOT, env=env)
        baseline = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        try:
            time.sleep(3)  # start-up is not idle time
            before = {p.pid: cpu_seconds(p.pid) for p in (agent, baseline)}
            started = time.monotonic()
            time.sleep(args.seconds)
            elapsed = time.monotonic() - started
            share = {pid: (cpu_seconds(pid) - cpu) / elapsed for pid, cpu in before.items()}
        finally:
            for process in (agent, baseline):
                process.terminate()
                process.wait(timeout=10)
    print(f"idle for {elapsed:.1f} s, CPU as a share of one core:")
    print(f"  agent worker (8 workers, local bus): {share[agent.pid]:6.2%}")
    print(f"  baseline (a sleeping python):        {share[baseline.pid]:6.2%}")
    print(f"  goal: agent <= 2.00% -> {'met' if share[agent.pid] <= 0.02 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
