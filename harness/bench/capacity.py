"""One deployment's capacity: the model (``harness.bench.capacity_model``) at the Bicep's SKUs, and its
local prediction checked against a measured run.

    .venv/bin/python -m harness.bench.capacity [--burst 300] [--concurrency 32] [--json
    harness/bench/results/capacity.json]

The run: the embedded stack as ``harness.bench.worker_paths`` starts it (the deployment package in a
worker process, simulator without faults, two agents), a warm-up order, then a burst of
``--burst`` orders. From devhost's task hub it reads when each attempt started (the claim's
``start_new``) and ended, and from those: T, the attempts' mean duration; the most attempts ever
running at once (never above the cap: the hard cap, issue 40); and the drain, attempts ended a
second from the first start to the last end. The model predicts the drain as cap ÷ T; the run
passes when the measured drain is within 20% of it (exit status 1 otherwise).

Then the Azure side, from ``harness/bench/results/ops_per_order.json``'s happy order: each service's
ceiling in orders a second at the deployed SKU, the first bottleneck, and the cost of 1 M orders.
It prints predicted against measured and writes ``--json`` (``docs/capacity.md`` reads it).
"""

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import threading
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from adapters.sqlite.state_store import SqliteStateStore  # noqa: E402
from domain.states import LOCKED_STATES  # noqa: E402
from harness.bench.capacity_model import (  # noqa: E402
    Limit,
    Price,
    cap_where_item_binds,
    ceiling,
    cost_per_million,
    drain,
    first_bottleneck,
    hot_item_ceiling,
    ru_per_order,
    within,
)
from harness.bench.happy_path import PROFILE, SETTINGS, StatusReceiver, post_orders, progress  # noqa: E402
from harness.bench.ops_per_order import RESULTS as OPS_RESULTS  # noqa: E402
from harness.demo.stack import Stack  # noqa: E402
from settings import Settings  # noqa: E402

TOLERANCE = 0.2

# --- The Bicep's SKUs and the services' published limits (read with the docs on each line) -----

# infra/main.bicep: functionMaximumInstanceCount = 40; host.json: 8 concurrent activities and 8
# Service Bus messages per instance.
FLEX_INSTANCES = 40
ACTIVITIES_PER_INSTANCE = 8
# The Durable Azure Storage backend's control queues: partitionCount, 4 by default, 16 at most
# (https://learn.microsoft.com/dotnet/api/microsoft.azure.webjobs.extensions.durabletask.azurestorageoptions.partitioncount).
PARTITIONS = 4

# Estimated RU per state-store call (1 KB records): a point read 1 RU, a write about 10 RU, a
# query about 3 RU (https://learn.microsoft.com/azure/cosmos-db/request-units), and a write of
# the in-flight slots item, which holds up to SAS_MAX_IN_FLIGHT holders (~80 bytes each), about
# 10 RU more per 4 KB. Estimates: docs/capacity.md says how to read the real charge.
RU = {
    "state store.get": 1.0,
    "state store.create_if_absent": 10.0,
    "state store.replace": 10.0,
    "state store.query_claimable": 3.0,
    "state store.count_in_states": 3.0,
    "state store.query_expired": 3.0,
    "state store.query_pending_notices": 3.0,
    "state store.acquire_slot": 1.0 + 20.0,  # read + replace of the slots item
    "state store.release_slot": 1.0 + 20.0,
    "state store.slots_acquired": 1.0,
}

# The in-flight slots item is one item in one logical partition, and one logical partition gets
# at most 10,000 RU/s whatever the container has ("Maximum RUs per partition (logical &
# physical)": https://learn.microsoft.com/azure/cosmos-db/concepts-limits). Every slot taken or
# freed reads it and replaces it whole, and it grows with the cap: HOLDER_BYTES a holder.
PARTITION_RU_PER_SECOND = 10_000
PARTITION_LIMIT_SOURCE = "https://learn.microsoft.com/azure/cosmos-db/concepts-limits"
HOLDER_BYTES = 80
SLOT_CALLS = ("state store.acquire_slot", "state store.release_slot")


def slots_item_ru(cap: int) -> float:
    """A read and a replace of the slots item full at ``cap`` holders: 1 RU, and 10 RU a write
    plus 10 RU per 4 KB (the RU estimate above; 412 retries under contention come on top)."""
    return 1.0 + 10.0 + 10.0 * cap * HOLDER_BYTES / 4096


def slots_partition(happy: dict[str, float], cap: int, attempt_seconds: float) -> dict[str, Any]:
    """The slots item's logical partition as a limit: its ceiling at ``cap``, and the cap at
    which the cap's own drain (cap / T) meets it, past which a higher cap buys nothing."""
    calls = sum(happy[name] for name in SLOT_CALLS)

    def ceiling_at(at: int) -> float:
        return hot_item_ceiling(PARTITION_RU_PER_SECOND, calls * slots_item_ru(at))

    binds_at, rate = cap_where_item_binds(attempt_seconds, ceiling_at)
    return {
        "ru_per_second": PARTITION_RU_PER_SECOND,
        "source": PARTITION_LIMIT_SOURCE,
        "calls_per_order": calls,
        "ru_per_order": round(calls * slots_item_ru(cap), 1),
        "orders_per_second": round(ceiling_at(cap), 1),
        "binds_at_cap": binds_at,
        "binds_at_orders_per_second": round(rate, 1),
    }


def limits() -> list[Limit]:
    return [
        Limit(
            "cosmos",
            "Cosmos DB serverless (one container)",
            "RU",
            5_000,
            "https://learn.microsoft.com/azure/cosmos-db/serverless-performance",
            "provisioned throughput (autoscale) instead of serverless: up to 10,000 RU/s per"
            " physical partition (https://learn.microsoft.com/azure/cosmos-db/concepts-limits)",
        ),
        Limit(
            "service_bus",
            "Service Bus Standard (credits, one namespace)",
            "Service Bus operations",
            1_000,
            "https://learn.microsoft.com/azure/service-bus-messaging/service-bus-throttling",
            "networkIsolation=true (Premium: dedicated messaging units, 1 to 16)",
        ),
        Limit(
            "storage_account",
            "Durable Azure Storage backend (one storage account)",
            "storage transactions",
            20_000,
            "https://learn.microsoft.com/azure/storage/queues/scalability-targets",
            "durableBackend=durableTaskScheduler (the task hub leaves the storage account)",
        ),
        Limit(
            "control_queues",
            f"Durable Azure Storage backend ({PARTITIONS} control queues)",
            "control-queue messages",
            2_000 * PARTITIONS,
            "https://learn.microsoft.com/azure/storage/queues/scalability-targets",
            "durableTask.storageProvider.partitionCount in host.json (up to 16)",
        ),
        Limit(
            "dts_dedicated",
            "Durable Task Scheduler Dedicated (1 capacity unit)",
            "DTS actions",
            2_000,
            "https://learn.microsoft.com/azure/azure-functions/durable/durable-task-scheduler/durable-task-scheduler-dedicated-sku",
            "durableTaskSchedulerCapacity (capacity units, up to 3)",
        ),
    ]


# List prices, USD, as read on the date given. The stored copies of Azure's pricing pages render
# no figures (they are filled in by script: "$-"), so no rate here is verified against a published
# page; each Price says what a stored page does confirm. They are the repository's cost notes
# (docs/deploying.md "Cost notes"): check them on the page before relying on them.
_DATE = "2026-12-02"
_PRICING = "https://azure.microsoft.com/pricing/details"
_NO_FIGURE = "the rate not verified: the stored copy of the pricing page renders no figures"
PRICES = [
    Price(
        "Cosmos DB serverless",
        "RU",
        0.25,
        1_000_000,
        f"{_PRICING}/cosmos-db/serverless/",
        _DATE,
        f"{_NO_FIGURE}; billing per RU consumed is (https://learn.microsoft.com/azure/cosmos-db/serverless)",
    ),
    Price(
        "Service Bus Standard (13 M-100 M tier)",
        "Service Bus operations",
        0.80,
        1_000_000,
        f"{_PRICING}/service-bus/",
        _DATE,
        f"{_NO_FIGURE}; the tiers are (the first 13 M operations a month included, then 13 M-100 M;"
        " an operation is any API call), on the same page",
    ),
    Price(
        "Azure Storage transactions (queues and tables)",
        "storage transactions",
        0.004,
        10_000,
        f"{_PRICING}/storage/queues/",
        _DATE,
        f"{_NO_FIGURE}; no stored page confirms it",
    ),
    Price(
        "Flex Consumption executions",
        "executions",
        0.40,
        1_000_000,
        f"{_PRICING}/functions/",
        _DATE,
        f"{_NO_FIGURE}; billing per execution, beyond a monthly free grant on demand, is"
        " (https://learn.microsoft.com/azure/azure-functions/functions-consumption-costs)",
    ),
]


def service_bus_operations(happy: dict[str, float]) -> float:
    names = (
        "Service Bus.send",
        "trigger completes",
        "trigger receive calls",
        "agent completes",
        "agent replies sent",
    )
    return sum(happy.get(n, 0.0) for n in names)


def control_queue_messages(happy: dict[str, float]) -> float:
    """Messages through the control queues: the start, each activity's result, each fired timer,
    each external event (the same method as harness.bench.ops_per_order's storage estimate)."""
    return sum(
        happy.get(n, 0.0)
        for n in ("durable instances", "durable activities", "durable timers", "durable events")
    )


def azure_model(happy: dict[str, float], cap: int, attempt_seconds: float) -> dict[str, Any]:
    consumed = {
        "RU": ru_per_order(happy, RU),
        "Service Bus operations": service_bus_operations(happy),
        "storage transactions": happy["estimate: task-hub storage transactions"],
        "control-queue messages": control_queue_messages(happy),
        "DTS actions": happy["estimate: DTS actions"],
        # The submission, the front end and each activity; episodes are billed as executions too.
        "executions": 2 + happy["durable activities"] + happy["durable episodes"],
    }
    ceilings = [ceiling(limit, consumed[limit.unit]) for limit in limits()]
    # The Azure Storage backend and the Scheduler are alternatives (durableBackend): the first
    # bottleneck is taken over the deployed default, Azure Storage.
    default = [c for c in ceilings if "Durable Task Scheduler" not in c.limit.service]
    first = first_bottleneck(default)
    return {
        "consumed_per_order": consumed,
        "ceilings": {
            c.limit.key: {
                "service": c.limit.service,
                "unit": c.limit.unit,
                "per_second": c.limit.per_second,
                "per_order": round(c.per_order, 1),
                "orders_per_second": round(c.orders_per_second, 1),
                "source": c.limit.source,
                "setting": c.limit.setting,
            }
            for c in ceilings
        },
        "in_flight_cap": {"cap": cap, "orders_per_second": round(drain(cap, attempt_seconds), 1)},
        "slots_partition": slots_partition(happy, cap, attempt_seconds),
        "first_service_bottleneck": {
            "key": first.limit.key,
            "service": first.limit.service,
            "orders_per_second": round(first.orders_per_second, 1),
            "setting": first.limit.setting,
        },
        "activity_slots": FLEX_INSTANCES * ACTIVITIES_PER_INSTANCE,
        "cost_per_million_orders_usd": {
            k: round(v, 2) for k, v in cost_per_million(consumed, PRICES).items()
        },
        "prices": [asdict(p) for p in PRICES],
    }


# --- the local run ---------------------------------------------------------------------------


def attempts(durable_db: Path, prefix: str) -> list[tuple[datetime, datetime]]:
    """(started, ended) of every completed attempt of the burst's orders."""
    with sqlite3.connect(durable_db) as conn:
        rows = conn.execute(
            "SELECT created_at, updated_at FROM instances WHERE status = 'Completed' AND instance_id LIKE ?",
            (f"{prefix}%",),
        ).fetchall()
    return [(datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in rows]


class InFlightWatch:
    """The most records ever locked (Processing or Compensating) at once, read off the state
    store on a thread of its own while the burst runs: each read is one SQLite statement, a
    consistent snapshot. The task hub's spans overlap a little more than the locks do (an
    orchestration ends one episode after its final write hands its slot on), so they are no
    measure of the cap."""

    def __init__(self, path: Path) -> None:
        self._states = SqliteStateStore(path)
        self._stop = threading.Event()
        self.highest = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.highest = max(self.highest, self._states.count_in_states(LOCKED_STATES))

    def __enter__(self) -> "InFlightWatch":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._states.close()


def measure(burst: int, concurrency: int, settings: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(Path(tmp), agents=2, profile=PROFILE, settings=SETTINGS | settings).start()
        try:
            cap = Settings.from_env(stack.env).max_in_flight
            token = stack.token_source(Settings.from_env(stack.env).submitters.apps[0].name)
            url = f"{stack.devhost_url}/api/orders"
            with StatusReceiver(stack.workdir / "servicebus.db") as receiver:
                receiver.wait(asyncio.run(post_orders(url, token(), ["warm-up"], 1)), 120)
                progress(f"burst of {burst}, cap {cap}")
                ids = [f"cap-{n}" for n in range(burst)]
                with InFlightWatch(stack.workdir / "data" / "state.db") as watch:
                    posted = asyncio.run(post_orders(url, token(), ids, concurrency))
                    receiver.wait(posted, 900, lambda done: progress(f"{done}/{burst} completed"))
            spans = attempts(stack.workdir / "devhost" / "durable.db", "cap-")
        finally:
            stack.stop()
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    t = sum((e - s).total_seconds() for s, e in spans) / len(spans)
    return {
        "cap": cap,
        "attempts": len(spans),
        "attempt_seconds": round(t, 3),
        "most_in_flight": watch.highest,
        "measured_drain": round(len(spans) / (last - first).total_seconds(), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--burst", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--measured",
        type=Path,
        help="take the local run's figures from this results file instead of running (the model recomputed)",
    )
    args = parser.parse_args()
    if args.measured:
        recorded = json.loads(args.measured.read_text())["local"]
        local = {
            k: recorded[k] for k in ("cap", "attempts", "attempt_seconds", "most_in_flight", "measured_drain")
        }
    else:
        local = measure(args.burst, args.concurrency, {})
    predicted = drain(local["cap"], local["attempt_seconds"])
    local["predicted_drain"] = round(predicted, 1)
    local["ratio"] = round(local["measured_drain"] / predicted, 2)
    local["within_20_percent"] = within(predicted, local["measured_drain"], TOLERANCE)
    happy = json.loads(OPS_RESULTS.read_text())["per_order"]["happy"]
    result = {"local": local, "azure": azure_model(happy, local["cap"], local["attempt_seconds"])}
    print(f"\nlocal drain: predicted cap/T = {local['cap']}/{local['attempt_seconds']:.2f} s ="
          f" {predicted:.1f}/s, measured {local['measured_drain']:.1f}/s (x{local['ratio']:.2f});"
          f" most in flight {local['most_in_flight']} of {local['cap']}")  # fmt: skip
    if args.json:  # first: the run's figures are kept whatever the printing does
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    for c in result["azure"]["ceilings"].values():
        per_order = f"{c['per_order']} {c['unit']}/order"
        print(f"  {c['service']:55} {c['orders_per_second']:9.1f} orders/s ({per_order})")
    print(f"first service bottleneck: {result['azure']['first_service_bottleneck']}")
    print(f"the slots item's logical partition: {result['azure']['slots_partition']}")
    print(f"cost per 1 M orders (USD): {result['azure']['cost_per_million_orders_usd']}")
    return 0 if local["within_20_percent"] and local["most_in_flight"] <= local["cap"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
