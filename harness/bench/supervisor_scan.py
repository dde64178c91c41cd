"""The Supervisor's scan cost with few and with many healthy records: window query vs recovery index.

    .venv/bin/python -m harness.bench.supervisor_scan [--cosmos]

Each store holds the same 100 expired records (CompleteBy 1 to 100 minutes ago) beside a small
and a large number of healthy ones (Processed: terminal, no CompleteBy). One scan is what a
Supervisor run reads before it recovers anything: every page of ``query_expired`` over the
default seven-day lookback. It runs once to warm up (for the index, that places the cursor),
then ``REPEATS`` times; the median wall time is reported.

SQLite: cost is what the adapters report (rows examined, plus one per point read and probe for
the index); VM steps are SQLite's own count of bytecode instructions for one scan, over every
connection involved. Cosmos (``--cosmos``: the @vercel/cosmosdb-server emulator, started and
stopped here): cost is the sum of ``x-ms-request-charge``. That emulator charges a flat 1 RU
per request and answers every query by scanning the whole container in memory, so its RU is a
request count, and its wall time grows with container size where real Cosmos DB's range index
would not. Loading it costs ~20 ms a document, so its healthy sets are 500 and 5,000.
"""

import argparse
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from adapters.sqlite.recovery_index import SqliteRecoveryIndex
from adapters.sqlite.state_store import SqliteStateStore
from domain import transitions
from domain.policy import SupervisorScan
from domain.ports import StateStore
from domain.record import StateRecord
from harness.bench import results as results_file
from services.indexed_state_store import IndexedStateStore
from tests.support.records import expired, processing

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
EXPIRED = 100
SQLITE_HEALTHY = (1_000, 50_000)
COSMOS_HEALTHY = (500, 5_000)
REPEATS = 5
BUCKET = timedelta(minutes=5)
SCAN = SupervisorScan()  # the app's defaults: seven days back, pages of 100


@dataclass(frozen=True)
class Result:
    method: str
    healthy: int
    pages: int
    items: int
    cost: float
    wall_ms: float
    vm_steps: int | None = None


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


def healthy_record(n: int) -> StateRecord:
    claimed = processing(f"h-{n:06d}", NOW - timedelta(days=2))
    return transitions.complete(claimed, instance=claimed.LockedBy or "", now=NOW - timedelta(days=2))


def expired_records() -> list[StateRecord]:
    return [expired(f"x-{n:03d}", NOW, ago=timedelta(minutes=1 + n)) for n in range(EXPIRED)]


def scan_once(store: StateStore) -> tuple[int, int, float]:
    """Every page of the Supervisor's scan; nothing is recovered, so each run sees the same work."""
    pages, items, cost = 0, 0, 0.0
    token = None
    while True:
        page = store.query_expired(NOW - SCAN.lookback, NOW, SCAN.page_size, token)
        pages += 1
        items += len(page.items)
        cost += page.cost
        token = page.continuation
        if token is None:
            return pages, items, cost


def measure(method: str, healthy: int, store: StateStore, count_steps: Callable[[], int] | None) -> Result:
    scan_once(store)  # warm-up; for the index it places the cursor, as the first run would
    walls = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        pages, items, cost = scan_once(store)
        walls.append((time.perf_counter() - started) * 1000)
    steps = count_steps() if count_steps else None
    return Result(method, healthy, pages, items, cost, statistics.median(walls), steps)


def vm_step_counter(connections: Sequence[sqlite3.Connection], store: StateStore) -> Callable[[], int]:
    """Counts SQLite bytecode steps of one scan on this thread's connections."""

    def count() -> int:
        steps = 0

        def tick() -> int:
            nonlocal steps
            steps += 1
            return 0  # 0: go on

        for conn in connections:
            conn.set_progress_handler(tick, 1)
        try:
            scan_once(store)
        finally:
            for conn in connections:
                conn.set_progress_handler(None, 1)
        return steps

    return count


def load(store: StateStore, records: Sequence[StateRecord], threads: int = 1) -> None:
    done = 0
    lock = threading.Lock()

    def create(record: StateRecord) -> None:
        nonlocal done
        store.create_if_absent(record)
        with lock:
            done += 1
            if done % 5000 == 0:
                progress(f"{done:,} / {len(records):,} loaded")

    if threads == 1:
        for record in records:
            create(record)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(create, records))


def sqlite_run(healthy: int) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        states = SqliteStateStore(Path(tmp) / "state.db")
        index = SqliteRecoveryIndex(Path(tmp) / "recovery_index.db", BUCKET)
        indexed = IndexedStateStore(states, index)
        # Loading only: no fsync per record. The scans below read, so durability is moot here.
        for conn in (states.database.connection(), index.database.connection()):
            conn.execute("PRAGMA synchronous=OFF")
        progress(f"SQLite: loading {healthy:,} healthy + {EXPIRED} expired records")
        load(indexed, [healthy_record(n) for n in range(healthy)])
        load(indexed, expired_records())
        progress("SQLite: scanning")
        state_conn = states.database.connection()
        index_conn = index.database.connection()
        results = [
            measure("window query", healthy, states, vm_step_counter([state_conn], states)),
            measure("recovery index", healthy, indexed, vm_step_counter([state_conn, index_conn], indexed)),
        ]
        indexed.close()
        return results


@contextmanager
def cosmos_server() -> Iterator[str]:
    from tests.support.emulators import COSMOS_PACKAGE, COSMOS_SERVER  # noqa: PLC0415 - only with --cosmos

    if not COSMOS_PACKAGE.exists():
        raise SystemExit("the Cosmos emulator is not installed: run `make emulators`")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen(
        ["node", str(COSMOS_SERVER), str(port), "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        ready = server.stdout.readline()  # "Ready to accept HTTPS connections at ..."
        if "Ready" not in ready:
            raise SystemExit(f"the Cosmos emulator did not start: {ready}")
        threading.Thread(target=server.stdout.read, daemon=True).start()  # keep its pipe drained
        yield f"https://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def cosmos_run(endpoint: str, healthy: int) -> list[Result]:
    import urllib3  # noqa: PLC0415 - only with --cosmos
    from azure.cosmos import CosmosClient, PartitionKey  # noqa: PLC0415

    from adapters.cosmos import recovery_index as cosmos_recovery_index  # noqa: PLC0415
    from adapters.cosmos import state_store as cosmos_state_store  # noqa: PLC0415
    from tests.support.emulators import EMULATOR_KEY  # noqa: PLC0415

    urllib3.disable_warnings()  # the emulator's certificate is self-signed, on loopback
    client = CosmosClient(endpoint, credential=EMULATOR_KEY, connection_verify=False)
    database = client.create_database(f"bench{uuid.uuid4().hex[:8]}")
    states = cosmos_state_store.CosmosStateStore(
        database.create_container("orderState", PartitionKey(cosmos_state_store.PARTITION_KEY_PATH)),
        emulator=True,
    )
    index = cosmos_recovery_index.CosmosRecoveryIndex(
        database.create_container("recoveryIndex", PartitionKey(cosmos_recovery_index.PARTITION_KEY_PATH)),
        BUCKET,
        emulator=True,
    )
    indexed = IndexedStateStore(states, index)
    progress(f"Cosmos: loading {healthy:,} healthy + {EXPIRED} expired records")
    load(indexed, [healthy_record(n) for n in range(healthy)], threads=16)
    load(indexed, expired_records(), threads=16)
    progress("Cosmos: scanning")
    results = [
        measure("window query", healthy, states, None),
        measure("recovery index", healthy, indexed, None),
    ]
    client.delete_database(database)
    return results


def report(title: str, results: list[Result], cost_unit: str) -> None:
    print(f"\n{title}")
    steps = any(r.vm_steps is not None for r in results)
    header = f"{'method':16} {'healthy':>8} {'pages':>6} {'items':>6} {cost_unit:>10} {'wall ms':>9}"
    print(header + (f" {'VM steps':>10}" if steps else ""))
    for r in results:
        line = f"{r.method:16} {r.healthy:>8,} {r.pages:>6} {r.items:>6} {r.cost:>10.1f} {r.wall_ms:>9.2f}"
        print(line + (f" {r.vm_steps:>10,}" if r.vm_steps is not None else ""))
    small, large = sorted({r.healthy for r in results})
    print(f"ratios {large:,} / {small:,} healthy:")
    for method in ("window query", "recovery index"):
        a = next(r for r in results if r.method == method and r.healthy == small)
        b = next(r for r in results if r.method == method and r.healthy == large)
        parts = [f"{cost_unit} x{b.cost / a.cost:.2f}", f"wall x{b.wall_ms / a.wall_ms:.2f}"]
        if a.vm_steps and b.vm_steps:
            parts.append(f"VM steps x{b.vm_steps / a.vm_steps:.2f}")
        print(f"  {method:16} " + ", ".join(parts))


def figures(results: list[Result]) -> dict[str, object]:
    """Per method, the scan with few and with many healthy records, and the cost ratio between."""
    small, large = sorted({r.healthy for r in results})
    by_method: dict[str, object] = {}
    for method in ("window query", "recovery index"):
        a = next(r for r in results if r.method == method and r.healthy == small)
        b = next(r for r in results if r.method == method and r.healthy == large)
        by_method[method.replace(" ", "_")] = {
            "few": {"healthy": a.healthy, "items": a.items, "cost": a.cost, "vm_steps": a.vm_steps},
            "many": {"healthy": b.healthy, "items": b.items, "cost": b.cost, "vm_steps": b.vm_steps},
            "cost_ratio": round(b.cost / a.cost, 2),
        }
    return by_method


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--cosmos", action="store_true", help="also measure on the Cosmos DB emulator")
    args = parser.parse_args()
    sqlite_results = [r for healthy in SQLITE_HEALTHY for r in sqlite_run(healthy)]
    report(
        f"SQLite: {EXPIRED} expired records beside {SQLITE_HEALTHY[0]:,} vs {SQLITE_HEALTHY[1]:,} healthy",
        sqlite_results,
        "rows",
    )
    if args.cosmos:
        with cosmos_server() as endpoint:
            cosmos_results = [r for healthy in COSMOS_HEALTHY for r in cosmos_run(endpoint, healthy)]
        report(
            f"Cosmos DB emulator: {EXPIRED} expired beside {COSMOS_HEALTHY[0]:,} vs {COSMOS_HEALTHY[1]:,}"
            " healthy (smaller sets: loading runs at ~20 ms a document; 1 RU = 1 request here)",
            cosmos_results,
            "RU",
        )
    measured = {"sqlite": figures(sqlite_results)}
    if args.cosmos:
        measured["cosmos"] = figures(cosmos_results)
    results_file.write(
        "supervisor_scan",
        settings={"expired": EXPIRED, "sqlite_healthy": SQLITE_HEALTHY, "cosmos": args.cosmos}
        | ({"cosmos_healthy": COSMOS_HEALTHY} if args.cosmos else {}),
        limit="none: it counts each scan's reads (rows, VM steps, RU), which do not depend on the machine",
        figures=measured,
    )


if __name__ == "__main__":
    main()
