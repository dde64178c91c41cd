"""Submission (E2, C6): idempotent dual write, conflicts never overwrite, crashes repaired."""

from datetime import timedelta

import pytest

from adapters.clock import ManualClock
from domain import transitions
from domain.apps import Registry
from domain.policy import SchedulerPolicy
from domain.ports import Created, StateStore
from domain.record import StateRecord
from domain.states import ProcessState
from services.submit_order import SubmitOutcome, submit_order
from tests.support.orders import make_submission
from tests.support.stores import Stores

REGISTRY = Registry.parse(
    "app-a=11111111-1111-1111-1111-111111111111,app-b=22222222-2222-2222-2222-222222222222"
)


def submit(stores: Stores, clock: ManualClock, submission=None, states: StateStore | None = None):
    return submit_order(
        submission or make_submission(),
        orders=stores.orders,
        states=states or stores.states,
        clock=clock,
        policy=SchedulerPolicy(),
        submitters=REGISTRY,
    )


def test_a_new_order_writes_both_records(stores: Stores, clock: ManualClock) -> None:
    result = submit(stores, clock)
    assert result.outcome is SubmitOutcome.ACCEPTED
    order = stores.orders.get("order-1")
    state = stores.states.get("order-1")
    assert order is not None and state is not None
    assert state.record.ProcessState is ProcessState.PENDING
    assert state.record.StatusQueue == "status-app-a"
    assert state.record.OrderHash == order.OrderHash == make_submission().order_hash()


def test_a_redelivered_submission_is_a_duplicate_and_writes_nothing(
    stores: Stores, clock: ManualClock
) -> None:
    submit(stores, clock)
    before = stores.states.get("order-1")
    clock.advance(timedelta(minutes=1))
    result = submit(stores, clock, make_submission(submitted_at=clock.now()))
    assert result.outcome is SubmitOutcome.DUPLICATE
    assert stores.states.get("order-1") == before


def test_conflicting_data_is_reported_and_both_records_stay_unchanged(
    stores: Stores, clock: ManualClock
) -> None:
    submit(stores, clock)
    order_before, state_before = stores.orders.get("order-1"), stores.states.get("order-1")
    result = submit(stores, clock, make_submission(quantity=5))
    assert result.outcome is SubmitOutcome.CONFLICT
    assert result.reason and "different data" in result.reason
    assert stores.orders.get("order-1") == order_before
    assert stores.states.get("order-1") == state_before


def test_a_state_record_conflict_is_caught_even_when_the_order_row_is_missing(
    stores: Stores, clock: ManualClock
) -> None:
    """The second write checks the hash too: it never trusts the first write alone."""
    other = make_submission(quantity=7)
    stores.states.create_if_absent(
        transitions.create(
            other.OrderID,
            status_queue=other.status_queue,
            order_hash=other.order_hash(),
            now=clock.now(),
            policy=SchedulerPolicy(),
        )
    )
    state_before = stores.states.get("order-1")
    result = submit(stores, clock)
    assert result.outcome is SubmitOutcome.CONFLICT
    assert "state record" in (result.reason or "")
    assert stores.states.get("order-1") == state_before


def test_an_app_that_is_not_registered_is_rejected_before_any_write(
    stores: Stores, clock: ManualClock
) -> None:
    result = submit(stores, clock, make_submission(app="someone-else"))
    assert result.outcome is SubmitOutcome.REJECTED
    assert stores.orders.get("order-1") is None and stores.states.get("order-1") is None


class CrashingStateStore:
    """Fault injection: the process dies after the SQL write, before the state record."""

    def __init__(self, inner: StateStore) -> None:
        self.inner = inner

    def create_if_absent(self, record: StateRecord) -> Created:
        raise ConnectionError("injected: process lost before the state record was written")

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def test_a_crash_between_the_two_writes_is_repaired_by_redelivery(stores: Stores, clock: ManualClock) -> None:
    with pytest.raises(ConnectionError):
        submit(stores, clock, states=CrashingStateStore(stores.states))  # type: ignore[arg-type]
    assert stores.orders.get("order-1") is not None
    assert stores.states.get("order-1") is None
    result = submit(stores, clock)  # the message is delivered again
    assert result.outcome is SubmitOutcome.ACCEPTED
    state = stores.states.get("order-1")
    assert state is not None and state.record.ProcessState is ProcessState.PENDING
