"""The StateStore contract: every adapter passes the same assertions."""

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta

import pytest

from adapters.clock import ManualClock
from domain import transitions
from domain.endings import GAVE_UP_ALERT, Notice, Part
from domain.errors import NotClaimable, PreconditionFailed, RecordNotFound
from domain.policy import RecoveryPolicy, SchedulerPolicy, SupervisorScan
from domain.ports import StateStore
from domain.states import LOCKED_STATES, ProcessState
from services.supervise import supervise
from tests.support.clock import T0
from tests.support.records import expired, pending, processing


def test_create_if_absent_creates_once_and_returns_the_existing_record(state_store: StateStore) -> None:
    first = state_store.create_if_absent(pending("o-1", T0))
    assert first.created
    other = replace(pending("o-1", T0 + timedelta(hours=1)), OrderHash="f" * 64)
    second = state_store.create_if_absent(other)
    assert not second.created
    assert second.stored.record == first.stored.record
    assert second.stored.etag == first.stored.etag


def test_get_returns_what_was_stored_and_none_for_unknown(state_store: StateStore) -> None:
    record = processing("o-1", T0)
    state_store.create_if_absent(record)
    stored = state_store.get("o-1")
    assert stored is not None and stored.record == record
    assert state_store.get("nope") is None


def test_replace_needs_the_current_etag_and_issues_a_new_one(state_store: StateStore) -> None:
    created = state_store.create_if_absent(pending("o-1", T0)).stored
    claimed = transitions.claim(created.record, now=T0, policy=SchedulerPolicy())
    written = state_store.replace(claimed, created.etag)
    assert written.etag != created.etag
    got = state_store.get("o-1")
    assert got is not None and got.record == claimed and got.etag == written.etag
    with pytest.raises(PreconditionFailed):
        state_store.replace(created.record, created.etag)
    got = state_store.get("o-1")
    assert got is not None and got.record == claimed  # the stale write changed nothing


def test_replace_of_a_missing_record_is_not_an_upsert(state_store: StateStore) -> None:
    with pytest.raises(RecordNotFound):
        state_store.replace(pending("ghost", T0), '"any"')
    assert state_store.get("ghost") is None


def test_twenty_threads_claiming_one_record_yield_exactly_one_claim(state_store: StateStore) -> None:
    state_store.create_if_absent(pending("o-1", T0))
    policy = SchedulerPolicy()
    barrier = threading.Barrier(20)
    outcomes: list[str] = []
    lock = threading.Lock()

    def claimer() -> None:
        stored = state_store.get("o-1")
        assert stored is not None
        barrier.wait()
        try:
            claimed = transitions.claim(stored.record, now=T0, policy=policy)
            state_store.replace(claimed, stored.etag)
            result = "won"
        except (PreconditionFailed, NotClaimable):
            result = "lost"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=claimer) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("won") == 1
    assert outcomes.count("lost") == 19
    final = state_store.get("o-1")
    assert final is not None
    assert final.record.Attempt == 1 and final.record.LockedBy == "o-1-1"


def test_query_claimable_returns_only_ready_pending_records_oldest_first(state_store: StateStore) -> None:
    clock = ManualClock(T0)
    policy = SchedulerPolicy()
    for n in (3, 1, 2):
        state_store.create_if_absent(pending(f"p-{n}", T0 + timedelta(seconds=n)))
    state_store.create_if_absent(processing("busy", T0))
    cooling = replace(pending("cooling", T0), NotBefore=T0 + timedelta(minutes=10))
    state_store.create_if_absent(cooling)
    done = transitions.complete(processing("done", T0), instance="done-1", now=T0)
    state_store.create_if_absent(done)

    now = clock.advance(timedelta(minutes=1))
    ids = [s.record.OrderID for s in state_store.query_claimable(now, 10)]
    assert ids == ["p-1", "p-2", "p-3"]
    assert [s.record.OrderID for s in state_store.query_claimable(now, 2)] == ["p-1", "p-2"]

    later = clock.advance(timedelta(minutes=10))
    assert "cooling" in [s.record.OrderID for s in state_store.query_claimable(later, 10)]
    assert policy.start_grace > timedelta(0)


def test_query_expired_is_bounded_by_the_window_and_the_locked_states(state_store: StateStore) -> None:
    now = T0 + timedelta(hours=2)
    window_start = now - timedelta(hours=1)
    state_store.create_if_absent(expired("in-window", now, ago=timedelta(minutes=5)))
    state_store.create_if_absent(expired("too-old", now, ago=timedelta(hours=3)))
    state_store.create_if_absent(processing("healthy", now))  # CompleteBy in the future
    state_store.create_if_absent(pending("waiting", T0))
    page = state_store.query_expired(window_start, now, 10)
    assert [s.record.OrderID for s in page.items] == ["in-window"]
    assert page.continuation is None
    assert page.cost > 0


def test_paging_returns_every_expired_record_exactly_once(state_store: StateStore) -> None:
    now = T0 + timedelta(days=1)
    expected = set()
    for n in range(250):
        # Several records share one CompleteBy so that paging must break ties.
        record = expired(f"e-{n:03d}", now, ago=timedelta(seconds=1 + n // 3))
        state_store.create_if_absent(record)
        expected.add(record.OrderID)
    seen: list[str] = []
    complete_bys = []
    token = None
    pages = 0
    while True:
        page = state_store.query_expired(now - timedelta(hours=1), now, 37, token)
        pages += 1
        assert page.cost > 0
        assert len(page.items) <= 37
        seen.extend(s.record.OrderID for s in page.items)
        complete_bys.extend(s.record.CompleteBy for s in page.items)
        token = page.continuation
        if token is None:
            break
    assert len(seen) == len(set(seen)) == 250
    assert set(seen) == expected
    assert complete_bys == sorted(complete_bys)
    assert pages == 7


def test_query_in_state_lists_one_state_by_order_id(state_store: StateStore) -> None:
    for order_id in ("c", "a", "b"):
        state_store.create_if_absent(pending(order_id, T0))
    state_store.create_if_absent(processing("busy", T0))
    assert [s.record.OrderID for s in state_store.query_in_state(ProcessState.PENDING, 10)] == ["a", "b", "c"]
    assert [s.record.OrderID for s in state_store.query_in_state(ProcessState.PENDING, 2)] == ["a", "b"]
    assert state_store.query_in_state(ProcessState.ERROR, 10) == []


def test_pending_notices_are_found_by_their_mark_and_nothing_else(state_store: StateStore) -> None:
    now = T0 + timedelta(days=1)
    for n in range(3):
        state_store.create_if_absent(expired(f"x-{n}", now))
    state_store.create_if_absent(replace(processing("terminal", T0), Untold=None))
    give_up = RecoveryPolicy(quick_retries=0, extended_retries=0)
    for order_id in ("x-0", "x-2"):
        stored = state_store.get(order_id)
        assert stored is not None
        gave_up = transitions.recover_expired(
            stored.record, expected_locked_by=stored.record.LockedBy or "", now=now, policy=give_up
        )
        state_store.replace(gave_up.record, stored.etag)
    pending_notices = state_store.query_pending_notices(10)
    assert [s.record.OrderID for s in pending_notices] == ["x-0", "x-2"]
    assert all(s.record.ProcessState is ProcessState.ERROR for s in pending_notices)
    assert [s.record.OrderID for s in state_store.query_pending_notices(1)] == ["x-0"]
    first = pending_notices[0].record
    told = transitions.told(first, of=first, done=[Part.STATUS], now=now)
    stored = state_store.replace(told, pending_notices[0].etag)
    assert stored.record.Untold == Notice("Failed", None, GAVE_UP_ALERT)  # what is left, as stored
    assert [s.record.OrderID for s in state_store.query_pending_notices(10)] == ["x-0", "x-2"]
    told = transitions.told(stored.record, of=first, done=list(Part), now=now)
    state_store.replace(told, stored.etag)
    assert [s.record.OrderID for s in state_store.query_pending_notices(10)] == ["x-2"]


def test_count_in_states(state_store: StateStore) -> None:
    state_store.create_if_absent(pending("a", T0))
    state_store.create_if_absent(processing("b", T0))
    state_store.create_if_absent(processing("c", T0))
    assert state_store.count_in_states(LOCKED_STATES) == 2
    assert state_store.count_in_states(frozenset({ProcessState.PENDING})) == 1
    assert state_store.count_in_states(frozenset()) == 0


def test_two_supervisors_recover_each_of_many_expired_records_exactly_once(
    state_store: StateStore, request: pytest.FixtureRequest
) -> None:
    # 1,000 on SQLite; 300 on the Cosmos server, which takes ~30 ms a request: still several
    # pages per Supervisor and the same race on every record.
    count = 300 if "cosmos" in request.node.callspec.id else 1000
    now = T0 + timedelta(days=1)
    records = [expired(f"x-{n:04d}", now, ago=timedelta(seconds=1 + n % 50)) for n in range(count)]
    with ThreadPoolExecutor(16) as pool:  # setup only: a networked store is slow one at a time
        list(pool.map(state_store.create_if_absent, records))
    clock = ManualClock(now)
    scan = SupervisorScan(page_size=count // 5, max_per_run=2000)
    reports = []
    barrier = threading.Barrier(2)

    def run() -> None:
        barrier.wait()
        reports.append(supervise(state_store, clock, RecoveryPolicy(), scan))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    recovered = [r.record.OrderID for report in reports for r in report.recovered]
    assert len(recovered) == len(set(recovered)) == count
    assert all(not report.gave_up for report in reports)
    for n in range(count):
        stored = state_store.get(f"x-{n:04d}")
        assert stored is not None
        assert stored.record.ProcessState is ProcessState.PENDING
        assert stored.record.FailureCount == 1
        assert stored.record.LockedBy is None
