"""Store operations, messages and round trips per order on the happy path.

    .venv/bin/python -m bench.ops_per_order [--orders 50]

Runs the real function_app.py on devhost (embedded profile, virtual clock) with an agent that
answers every request at once, counts every call the app makes through its ports, and prints
the per-order averages beside the minimum the protocol needs. Shared work (the starter's and
the Supervisor's queries) is reported per order too, amortised over the batch.

``bench.happy_path`` prints this table in its own run (``measure`` and ``print_table``).
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devhost.clock import VirtualClock  # noqa: E402
from devhost.host import Host  # noqa: E402
from services.context import Ports  # noqa: E402
from tests.app.conftest import T0, ScriptedAgent, submission  # noqa: E402

# What the protocol cannot do without, per order (see docs/deploying.md "Cost per order").
MINIMUM = {
    "states.create_if_absent": 1,  # E3: the record
    "states.replace": 8,  # claim; 2 local steps x record; 2 agent steps x (begin + record); complete
    # The attempt's start (the first advance); every later fenced write starts from the process's copy
    # of the record (services/record_cache.py) and reads only when its ETag has gone stale.
    "states.get": 1,
    "states.count_in_states": 1,  # the in-flight cap, checked when the submission starts the order
    "orders.insert_if_absent": 1,  # E2: the order
    "orders.get": 1,  # E7: the orchestrator reads the order
    "orders.update_status": 1,  # ConfirmOrder
    "compensation_log.append": 2,  # one entry per step that can be undone (R9)
    "send agent-requests": 2,  # one request per agent step (R2)
    "send status": 2,  # received, completed (E16)
}


class Counting:
    """Counts every method call made on the wrapped port."""

    def __init__(self, name: str, inner: Any, counts: Counter[str]) -> None:
        self._name, self._inner, self._counts = name, inner, counts

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        if not callable(value):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._counts[f"{self._name}.{attr}"] += 1
            if self._name == "sender" and attr == "send":
                queue = str(args[0])
                self._counts["send " + ("status" if queue.startswith("status-") else queue)] += 1
            return value(*args, **kwargs)

        return counted


async def run(orders: int) -> Counter[str]:
    values = json.loads((ROOT / "local.settings.embedded.json").read_text())["Values"]
    with tempfile.TemporaryDirectory() as tmp:
        values |= {
            "SAS_DATA_DIR": f"{tmp}/data",
            "LOCAL_SERVICEBUS_PATH": f"{tmp}/servicebus.db",
            "SAS_MAX_IN_FLIGHT": str(orders),
            "SAS_CLAIM_BATCH_SIZE": str(orders),
        }
        os.environ.update(values)
        clock = VirtualClock(T0)
        # In process: the counters wrap the app's own ports (function_app.ports).
        host = Host(ROOT, clock=clock, data_dir=Path(tmp) / "devhost", port=0, in_process=True)
        await host.start()
        app = sys.modules["function_app"]
        real: Ports = app.ports()
        counts: Counter[str] = Counter()
        counted = replace(
            real,
            states=Counting("states", real.states, counts),
            orders=Counting("orders", real.orders, counts),
            compensation_log=Counting("compensation_log", real.compensation_log, counts),
            sender=Counting("sender", real.sender, counts),
        )
        app.ports = lambda: counted  # every function body now goes through the counters
        agent = ScriptedAgent(host.servicebus, clock)
        host.extra_sources.append(agent)
        ids = [f"bench-{n}" for n in range(orders)]
        for order_id in ids:
            host.servicebus.send("orders", submission(order_id).model_dump_json(), message_id=order_id)

        def done() -> bool:
            return all(
                (stored := real.states.get(i)) is not None and stored.record.ProcessState.value == "Processed"
                for i in ids
            )

        await host.run_until(done)
        # The Durable work: every orchestrator episode replays the instance's whole history.
        counts["durable.episodes"] = host.invocations["orchestrationTrigger"]
        counts["durable.activities"] = host.invocations["activityTrigger"]
        counts["durable.history_events"] = sum(len(host.engine.history(f"{i}-1")) for i in ids)
        await host.stop()
        return counts


def measure(orders: int) -> Counter[str]:
    """The counts for ``orders`` happy-path orders. The process's environment is restored
    afterwards: the run sets the app's settings in it, which would leak into what runs next."""
    saved = dict(os.environ)
    try:
        return asyncio.run(run(orders))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def print_table(counts: Counter[str], orders: int) -> None:
    print(f"{'operation (per order)':32} {'measured':>9} {'minimum':>8}")
    for name in sorted(counts):
        minimum = MINIMUM.get(name)
        print(f"{name:32} {counts[name] / orders:9.2f} {'' if minimum is None else minimum:>8}")
    reads = sum(v for k, v in counts.items() if k in ("states.get",))
    print(f"\nstate-store point reads per order: {reads / orders:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=50)
    orders = parser.parse_args().orders
    print_table(measure(orders), orders)


if __name__ == "__main__":
    main()
