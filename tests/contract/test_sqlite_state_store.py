"""What only the embedded SQLite state store must show: safety across processes, and a
Supervisor scan whose work does not grow with the number of healthy records."""

import multiprocessing
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.sqlite.state_store import SqliteStateStore
from domain import transitions
from domain.errors import PreconditionFailed
from domain.policy import SchedulerPolicy
from tests.support.clock import T0
from tests.support.records import expired, pending, processing


def _race(
    path: str,
    etag: str,
    barrier: "multiprocessing.synchronize.Barrier",
    results: "multiprocessing.Queue[str]",
) -> None:
    store = SqliteStateStore(path)
    stored = store.get("o-1")
    assert stored is not None
    claimed = transitions.claim(stored.record, now=T0, policy=SchedulerPolicy())
    barrier.wait()
    try:
        store.replace(claimed, etag)
        results.put("won")
    except PreconditionFailed:
        results.put("lost")


@pytest.mark.processes  # multiprocessing
def test_processes_racing_a_replace_on_one_etag_have_exactly_one_winner(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = 6
    for round_ in range(3):
        path = tmp_path / f"race-{round_}.db"
        store = SqliteStateStore(path)
        etag = store.create_if_absent(pending("o-1", T0)).stored.etag
        barrier = context.Barrier(workers)
        results: multiprocessing.Queue[str] = context.Queue()
        procs = [
            context.Process(target=_race, args=(str(path), etag, barrier, results)) for _ in range(workers)
        ]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout=60)
            assert proc.exitcode == 0
        outcomes = sorted(results.get(timeout=5) for _ in range(workers))
        assert outcomes == ["lost"] * (workers - 1) + ["won"]
        stored = store.get("o-1")
        assert stored is not None and stored.record.Attempt == 1
        store.close()


def _vm_steps_of_expired_scan(store: SqliteStateStore) -> int:
    """SQLite virtual-machine instructions spent on one page of the Supervisor's query."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = store.database.connection()
    conn.set_progress_handler(count, 1)
    try:
        now = T0 + timedelta(days=1)
        page = store.query_expired(now - timedelta(hours=1), now, 100)
    finally:
        conn.set_progress_handler(None, 1)
    assert len(page.items) == 20
    return steps


def test_the_supervisor_scan_does_not_grow_with_healthy_records(tmp_path: Path) -> None:
    now = T0 + timedelta(days=1)
    path = tmp_path / "state.db"
    store = SqliteStateStore(path)
    for n in range(20):
        store.create_if_absent(expired(f"x-{n}", now))
    baseline = _vm_steps_of_expired_scan(store)
    for n in range(5000):
        healthy = processing(f"h-{n}", now) if n % 2 else pending(f"p-{n}", now)
        store.create_if_absent(healthy)
    done = transitions.complete(processing("d", now), instance="d-1", now=now)
    store.create_if_absent(done)
    after = _vm_steps_of_expired_scan(store)
    # B-tree depth may add a few steps; a scan over 5,000 rows would add tens of thousands.
    assert after <= baseline + 50, (baseline, after)
