"""What an idle devhost costs: CPU of ``python -m harness.devhost start`` on function_app.py with nothing
to do.

    .venv/bin/python -m harness.bench.devhost_idle [--seconds 20]

The embedded stack as ``make demo`` starts it, without agents, and with the starter and the
supervisor once a day so that no timer fires in the window. Reports the devhost process's CPU
time over the window from ``/proc/<pid>/stat`` as a share of one core. Its loops wait to be told
of work, or for the next due time, rather than poll; what is left is chiefly the Service Bus
watcher reading the bus file's commit counter (``COMMIT_CHECK_INTERVAL`` in
harness/devhost/servicebus_triggers.py).
"""

import argparse
import tempfile
import time
from pathlib import Path

from harness.bench.agent_idle import cpu_seconds
from harness.demo.stack import Stack

ONCE_A_DAY = "0 0 0 * * *"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(
            Path(tmp),
            agents=0,
            settings={"SAS_STARTER_SCHEDULE": ONCE_A_DAY, "SAS_SUPERVISOR_SCHEDULE": ONCE_A_DAY},
        ).start()
        try:
            pid = stack.processes["devhost"].pid
            time.sleep(3)  # start-up is not idle time
            before = cpu_seconds(pid)
            started = time.monotonic()
            time.sleep(args.seconds)
            elapsed = time.monotonic() - started
            share = (cpu_seconds(pid) - before) / elapsed
        finally:
            stack.stop()
    print(f"idle for {elapsed:.1f} s: devhost (function_app.py, local bus) used {share:.2%} of a core")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
