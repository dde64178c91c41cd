"""The Supervisor (E13-E15): bounded scans, two-tier recovery, reported cost."""

from datetime import timedelta

import pytest

from adapters.clock import ManualClock
from domain import transitions
from domain.policy import RecoveryPolicy, SchedulerPolicy, SupervisorScan
from domain.ports import Page
from domain.states import ProcessState
from services.claim_pending import claim_pending
from services.supervise import supervise
from tests.support.records import expired, processing
from tests.support.stores import Stores


def test_only_expired_records_inside_the_window_are_recovered(stores: Stores, clock: ManualClock) -> None:
    now = clock.now()
    stores.states.create_if_absent(expired("late", now, ago=timedelta(minutes=1)))
    stores.states.create_if_absent(expired("ancient", now, ago=timedelta(days=30)))
    stores.states.create_if_absent(processing("healthy", now))
    report = supervise(stores.states, clock, RecoveryPolicy(), SupervisorScan(lookback=timedelta(days=1)))
    assert [r.record.OrderID for r in report.recovered] == ["late"]
    assert report.pages == 1 and report.cost > 0
    healthy = stores.states.get("healthy")
    assert healthy is not None and healthy.record.ProcessState is ProcessState.PROCESSING


def test_a_run_stops_at_max_per_run_and_the_next_run_continues(stores: Stores, clock: ManualClock) -> None:
    now = clock.now()
    for n in range(25):
        stores.states.create_if_absent(expired(f"e-{n:02d}", now, ago=timedelta(seconds=n + 1)))
    scan = SupervisorScan(page_size=4, max_per_run=10)
    first = supervise(stores.states, clock, RecoveryPolicy(), scan)
    assert len(first.recovered) == 10 and first.truncated and first.pages == 3
    second = supervise(stores.states, clock, RecoveryPolicy(), scan)
    third = supervise(stores.states, clock, RecoveryPolicy(), scan)
    assert len(second.recovered) == 10 and len(third.recovered) == 5 and not third.truncated
    oldest_first = [r.record.OrderID for r in first.recovered]
    assert oldest_first == [f"e-{n:02d}" for n in range(24, 14, -1)]


def test_an_order_that_keeps_expiring_ends_in_error_with_an_alertable_report(
    stores: Stores, clock: ManualClock
) -> None:
    """Claim → expire → recover, through the real services, until the policy gives up."""
    policy = SchedulerPolicy()
    recovery = RecoveryPolicy(quick_retries=1, extended_retries=1, cooldown=timedelta(minutes=2))
    stores.states.create_if_absent(
        transitions.create(
            "o-1", status_queue="status-app-a", order_hash="0" * 64, now=clock.now(), policy=policy
        )
    )
    outcomes = []
    for _ in range(10):
        claims = claim_pending(stores.states, clock, policy, max_in_flight=5, batch_size=5).claims
        if not claims:
            clock.advance(recovery.cooldown)
            continue
        clock.advance(policy.start_grace + timedelta(seconds=1))  # the orchestration never reports back
        report = supervise(stores.states, clock, recovery, SupervisorScan())
        outcomes.extend(r.outcome.value for r in report.recovered + report.gave_up)
        if report.gave_up:
            break
    assert outcomes == ["retry", "cool_down", "gave_up"]
    stored = stores.states.get("o-1")
    assert stored is not None
    assert stored.record.ProcessState is ProcessState.ERROR
    assert stored.record.FailureCount == 3 and stored.record.Attempt == 3


def test_an_orchestration_that_moved_on_is_not_recovered(stores: Stores, clock: ManualClock) -> None:
    """The scan's ETag pins the expired LockedBy: a record changed meanwhile is left alone."""
    now = clock.now()
    created = stores.states.create_if_absent(expired("o-1", now)).stored
    page = stores.states.query_expired(now - timedelta(days=1), now, 10)
    # The orchestration finishes between the Supervisor's read and its write.
    done = transitions.complete(created.record, instance=created.record.LockedBy or "", now=now)
    stores.states.replace(done, created.etag)

    class StalePage:
        def __getattr__(self, name: str):
            return getattr(stores.states, name)

        def query_expired(self, *args: object, **kwargs: object):
            return page

    report = supervise(StalePage(), clock, RecoveryPolicy(), SupervisorScan())  # type: ignore[arg-type]
    assert report.lost == 1 and not report.recovered
    final = stores.states.get("o-1")
    assert final is not None and final.record.ProcessState is ProcessState.PROCESSED


def test_each_give_up_is_reported_as_soon_as_it_is_written(stores: Stores, clock: ManualClock) -> None:
    """A store failure later in the scan must not cost earlier orders their notifications."""
    now = clock.now()
    give_up_now = RecoveryPolicy(quick_retries=0, extended_retries=0)
    for n in range(3):
        stores.states.create_if_absent(expired(f"e-{n}", now, ago=timedelta(seconds=3 - n)))
    told: list[str] = []

    class FailsOnTheThird:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(stores.states, name)

        def replace(self, record, etag):  # type: ignore[no-untyped-def]
            if record.OrderID == "e-2":
                raise ConnectionError("injected: the store went away mid-scan")
            return stores.states.replace(record, etag)

    with pytest.raises(ConnectionError):
        supervise(
            FailsOnTheThird(),  # type: ignore[arg-type]
            clock,
            give_up_now,
            SupervisorScan(),
            lambda r, _: told.append(r.record.OrderID),
        )
    assert told == ["e-0", "e-1"]


def test_a_continuation_that_makes_no_progress_ends_the_run(stores: Stores, clock: ManualClock) -> None:
    """The open-source Cosmos server answers a forgotten cursor with an empty page and the same
    token: the run must end (and the timer fire again), not loop on it."""
    calls: list[str | None] = []

    class ForgetfulCursor:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(stores.states, name)

        def query_expired(self, start, now, limit, continuation=None):  # type: ignore[no-untyped-def]
            calls.append(continuation)
            return Page(items=[], continuation="cursor-1", cost=1.0)

    report = supervise(ForgetfulCursor(), clock, RecoveryPolicy(), SupervisorScan())  # type: ignore[arg-type]
    assert calls == [None, "cursor-1"]
    assert report.pages == 2 and not report.truncated
