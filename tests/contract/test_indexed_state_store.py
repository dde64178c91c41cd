"""The state store behind the recovery index (E14), over every index adapter.

The StateStore contract runs over the indexed stores too (``sqlite+index``, ``cosmos+index`` in
conftest); these are the cases only an index has: stale entries, a crash between the entry
and the record, catching up after an outage, and the cursor.
"""

from datetime import timedelta
from pathlib import Path

import pytest

from adapters.clock import ManualClock
from adapters.sqlite.recovery_index import SqliteRecoveryIndex
from adapters.sqlite.state_store import SqliteStateStore
from domain import transitions
from domain.errors import PreconditionFailed
from domain.policy import RecoveryPolicy, SchedulerPolicy, SupervisorScan
from domain.recovery_index import BucketSizeMismatch, IndexEntry, recovery_bucket
from services.indexed_state_store import IndexedStateStore
from services.supervise import supervise
from tests.support.clock import T0
from tests.support.records import expired, pending, processing

NOW = T0 + timedelta(days=1)
HOUR = timedelta(hours=1)


def _expired_ids(store: IndexedStateStore, window_start: timedelta = HOUR) -> list[str]:
    ids: list[str] = []
    token = None
    while True:
        page = store.query_expired(NOW - window_start, NOW, 50, token)
        ids.extend(s.record.OrderID for s in page.items)
        token = page.continuation
        if token is None:
            return ids


def _entries(store: IndexedStateStore, order_id: str) -> list[IndexEntry]:
    """Every entry of the order in the hour before NOW and the hour after."""
    size = store.index.bucket_size
    bucket = recovery_bucket(NOW - HOUR, size)
    found = []
    while bucket <= NOW + HOUR:
        found.extend(
            e for e in store.index.due(bucket, NOW + 2 * HOUR, 1000).entries if e.OrderID == order_id
        )
        bucket += size
    return found


def test_a_record_that_moved_on_is_not_returned_and_its_entry_is_dropped(
    indexed_store: IndexedStateStore,
) -> None:
    claimed_at = NOW - timedelta(minutes=10)
    stored = indexed_store.create_if_absent(processing("o-1", claimed_at)).stored
    # The orchestration finished: CompleteBy null; the claim's entry is now stale.
    done = transitions.complete(stored.record, instance="o-1-1", now=claimed_at + timedelta(seconds=5))
    indexed_store.replace(done, stored.etag)
    assert len(_entries(indexed_store, "o-1")) == 1
    assert _expired_ids(indexed_store) == []
    assert _entries(indexed_store, "o-1") == []


def test_an_entry_for_an_older_complete_by_is_dropped_and_the_current_one_kept(
    indexed_store: IndexedStateStore,
) -> None:
    policy = SchedulerPolicy()
    claimed_at = NOW - timedelta(minutes=10)
    stored = indexed_store.create_if_absent(processing("o-1", claimed_at)).stored
    started = transitions.begin_step(
        stored.record, instance="o-1-1", step="ReserveInventory", now=claimed_at, policy=policy
    ).record
    indexed_store.replace(started, stored.etag)  # CompleteBy moved: start grace -> step timeout
    [page_item] = indexed_store.query_expired(NOW - HOUR, NOW, 50).items
    assert page_item.record.CompleteBy == started.CompleteBy
    assert [e.CompleteBy for e in _entries(indexed_store, "o-1")] == [started.CompleteBy]


def test_a_crash_between_entry_and_record_leaves_a_stale_entry_the_next_scan_drops(
    indexed_store: IndexedStateStore,
) -> None:
    # Creation: the entry is written, then the record write fails (a crash, a lost race).
    record = expired("never-written", NOW, ago=timedelta(minutes=5))

    class Crash(Exception):
        pass

    real = indexed_store.states

    class CrashingStates:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def create_if_absent(self, record: object) -> object:
            raise Crash

    crashing = IndexedStateStore(CrashingStates(), indexed_store.index)  # type: ignore[arg-type]
    with pytest.raises(Crash):
        crashing.create_if_absent(record)
    # Replace: the entry is written, then the conditional replace loses.
    stored = indexed_store.create_if_absent(processing("raced", NOW - timedelta(hours=2))).stored
    recovered = transitions.recover_expired(
        stored.record, expected_locked_by="raced-1", now=NOW - timedelta(minutes=30), policy=RecoveryPolicy()
    ).record
    indexed_store.replace(recovered, stored.etag)
    reclaimed = transitions.claim(recovered, now=NOW - timedelta(minutes=20), policy=SchedulerPolicy())
    with pytest.raises(PreconditionFailed):
        indexed_store.replace(reclaimed, stored.etag)  # stale ETag: its entry was written first
    assert len(_entries(indexed_store, "never-written")) == 1
    assert len(_entries(indexed_store, "raced")) == 1
    assert _expired_ids(indexed_store) == []
    assert _entries(indexed_store, "never-written") == []
    assert _entries(indexed_store, "raced") == []


def test_records_expired_ten_days_ago_are_recovered_through_the_cursor(
    indexed_store: IndexedStateStore,
) -> None:
    clock = ManualClock(T0)
    scan = SupervisorScan(lookback=timedelta(days=7), page_size=20, max_per_run=500)
    first = supervise(indexed_store, clock, RecoveryPolicy(), scan)  # places the cursor
    assert first.scanned == 0
    for n in range(30):
        indexed_store.create_if_absent(processing(f"o-{n:02d}", T0 + timedelta(minutes=n)))
    healthy = pending("waiting", T0)
    indexed_store.create_if_absent(healthy)
    # The Supervisor is down for ten days: longer than its seven-day lookback.
    clock.advance(timedelta(days=10))
    report = supervise(indexed_store, clock, RecoveryPolicy(), scan)
    assert sorted(r.record.OrderID for r in report.recovered) == [f"o-{n:02d}" for n in range(30)]
    assert not report.truncated
    # The window query would have missed them all: they expired before its window.
    window = indexed_store.states.query_expired(clock.now() - scan.lookback, clock.now(), 100)
    assert window.items == []
    # The next run drops the recovered records' stale entries and moves the cursor to now.
    supervise(indexed_store, clock, RecoveryPolicy(), scan)
    cursor = indexed_store.index.cursor()
    assert cursor is not None and cursor >= clock.now() - 3 * indexed_store.index.bucket_size


def test_a_steady_scan_reads_a_few_buckets_whatever_the_store_holds(
    indexed_store: IndexedStateStore,
) -> None:
    clock = ManualClock(NOW)
    scan = SupervisorScan(lookback=timedelta(days=7), page_size=100, max_per_run=500)
    supervise(indexed_store, clock, RecoveryPolicy(), scan)  # a fresh index: places the cursor
    clock.advance(timedelta(minutes=1))
    quiet = supervise(indexed_store, clock, RecoveryPolicy(), scan)
    # The cursor read plus one single-partition read per bucket from the cursor to now.
    # The cursor read and one probe that finds nothing: no read per bucket, none per record.
    assert quiet.pages == 1
    assert quiet.cost <= 3
    for n in range(5):
        indexed_store.create_if_absent(processing(f"o-{n}", clock.now()))
    clock.advance(timedelta(minutes=5))
    report = supervise(indexed_store, clock, RecoveryPolicy(), scan)
    assert len(report.recovered) == 5


def test_the_cursor_does_not_pass_a_bucket_with_live_entries(indexed_store: IndexedStateStore) -> None:
    indexed_store.create_if_absent(expired("old", NOW, ago=timedelta(minutes=40)))
    page = indexed_store.query_expired(NOW - HOUR, NOW, 10)
    assert [s.record.OrderID for s in page.items] == ["old"]
    expired_at = page.items[0].record.CompleteBy
    assert expired_at is not None
    assert indexed_store.index.cursor() == recovery_bucket(expired_at, indexed_store.index.bucket_size)


def test_a_new_index_starts_at_the_window(indexed_store: IndexedStateStore) -> None:
    indexed_store.create_if_absent(expired("older-than-window", NOW, ago=3 * HOUR))
    indexed_store.create_if_absent(expired("in-window", NOW, ago=timedelta(minutes=5)))
    assert _expired_ids(indexed_store, window_start=HOUR) == ["in-window"]
    # Once placed, the cursor is the bound, not the window.
    assert _expired_ids(indexed_store, window_start=timedelta(minutes=1)) == ["in-window"]


def test_a_different_bucket_size_is_refused(tmp_path: Path) -> None:
    SqliteRecoveryIndex(tmp_path / "index.db", timedelta(minutes=5)).advance_cursor(T0)
    with pytest.raises(BucketSizeMismatch, match="SAS_RECOVERY_BUCKET_MINUTES"):
        SqliteRecoveryIndex(tmp_path / "index.db", timedelta(minutes=10)).cursor()


def test_a_scan_is_bounded_in_buckets_per_call(tmp_path: Path) -> None:
    store = IndexedStateStore(
        SqliteStateStore(tmp_path / "state.db"),
        SqliteRecoveryIndex(tmp_path / "index.db", timedelta(minutes=5)),
        max_buckets_per_call=10,
    )
    expected = [f"o-{n:02d}" for n in range(25)]
    for n, order_id in enumerate(expected):  # one per bucket, oldest first
        store.create_if_absent(expired(order_id, NOW, ago=timedelta(minutes=5 * (25 - n))))
    pages = []
    token = None
    while True:
        page = store.query_expired(NOW - 4 * HOUR, NOW, 100, token)
        pages.append([s.record.OrderID for s in page.items])
        token = page.continuation
        if token is None:
            break
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [o for p in pages for o in p] == expected
    store.close()
