"""The embedded state store's write path under two worker processes, at ``synchronous=FULL``
and at ``NORMAL`` (what it runs), in one run.

    .venv/bin/python -m harness.bench.sqlite_writers [--processes 2] [--threads 16] [--orders 10]
        [--rounds 2] [--json]

Each of ``--processes`` processes (the app's worker processes) runs ``--threads`` threads (its
invocations at once), each writing ``--orders`` orders' state-store commits as one order makes
them (``harness/bench/results/ops_per_order.json``, happy order): the record created, a slot taken,
eight replaces, the slot freed. All on one file, as the embedded profile shares ``state.db``.
It prints orders and commits a second for each setting, alternating them ``--rounds`` times, and
the ratio NORMAL / FULL of the medians. ``--json`` writes ``harness/bench/results/sqlite_writers.json``.
"""

import argparse
import multiprocessing
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from adapters.sqlite.state_store import SqliteStateStore
from domain import transitions
from domain.ids import instance_id
from domain.policy import SchedulerPolicy
from domain.ports import Slot
from domain.record import StateRecord
from harness.bench import results

REPLACES = 8  # the happy order's state store.replace count
COMMITS_PER_ORDER = 1 + 1 + REPLACES + 1  # create, slot, replaces, slot freed


def _pending(order_id: str) -> StateRecord:
    now = datetime.now(UTC)
    return transitions.create(
        order_id, status_queue="status-bench", order_hash="0" * 64, now=now, policy=SchedulerPolicy()
    )


def _order(store: SqliteStateStore, order_id: str) -> None:
    created = store.create_if_absent(_pending(order_id)).stored
    now = datetime.now(UTC)
    claimed = transitions.claim(created.record, now=now, policy=SchedulerPolicy())
    store.acquire_slot(Slot(instance_id(order_id, 1), order_id, now, now - timedelta(minutes=1)), limit=10**9)
    etag = created.etag
    for n in range(REPLACES):
        # The last write unlocks the record, as an attempt's end does, before its slot is freed.
        record = claimed if n < REPLACES - 1 else created.record
        etag = store.replace(record, etag).etag
    store.release_slot(instance_id(order_id, 1))


def _process(path: str, synchronous: str, name: str, threads: int, orders: int) -> None:
    store = SqliteStateStore(path, synchronous=synchronous)
    workers = [
        threading.Thread(target=lambda t=t: [_order(store, f"{name}-{t}-{n}") for n in range(orders)])
        for t in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    store.close()


def run(synchronous: str, args: argparse.Namespace) -> float:
    """Orders a second, all processes together, from the first start to the last exit."""
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "state.db")
        SqliteStateStore(path, synchronous=synchronous).close()
        processes = [
            context.Process(target=_process, args=(path, synchronous, f"p{p}", args.threads, args.orders))
            for p in range(args.processes)
        ]
        started = time.perf_counter()
        for process in processes:
            process.start()
        for process in processes:
            process.join()
            if process.exitcode != 0:
                raise RuntimeError(f"a writer process failed ({process.exitcode})")
        elapsed = time.perf_counter() - started
    return args.processes * args.threads * args.orders / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--orders", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true", help="write harness/bench/results/sqlite_writers.json")
    args = parser.parse_args()
    rates: dict[str, list[float]] = {"FULL": [], "NORMAL": []}
    for _ in range(args.rounds):
        for synchronous, measured in rates.items():
            measured.append(run(synchronous, args))
            print(f"{synchronous:6} {measured[-1]:7.1f} orders/s", flush=True)
    medians = {s: statistics.median(r) for s, r in rates.items()}
    ratio = medians["NORMAL"] / medians["FULL"]
    print(f"NORMAL / FULL: {ratio:.2f} ({COMMITS_PER_ORDER} commits an order)")
    if args.json:
        results.write(
            "sqlite_writers",
            settings={k: v for k, v in vars(args).items() if k != "json"},
            limit="state.db's single writer: every commit of both processes takes its write lock in turn",
            figures={
                "commits_per_order": COMMITS_PER_ORDER,
                "orders_per_second": {s: round(m, 1) for s, m in medians.items()},
                "commits_per_second": {s: round(m * COMMITS_PER_ORDER) for s, m in medians.items()},
                "ratio_normal_over_full": round(ratio, 2),
                "rounds": {s: [round(r, 1) for r in rs] for s, rs in rates.items()},
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
