"""Submission (E2, C6): idempotent dual write, conflicts never overwrite, crashes repaired."""

from datetime import timedelta

import pytest

from adapters.clock import ManualClock
from domain import transitions
from domain.apps import Registry
from domain.errors import DependencyUnavailable
from domain.policy import SchedulerPolicy
from domain.ports import Created, OrderRow, OrdersRepository, StateStore
from domain.record import StateRecord
from domain.states import ProcessState
from services.submit_order import SubmitOutcome, submit_order
from tests.support.orders import make_submission
from tests.support.stores import Stores

REGISTRY = Registry.parse(
    "app-a=11111111-1111-1111-1111-111111111111,app-b=22222222-2222-2222-2222-222222222222"
)


def submit(
    stores: Stores,
    clock: ManualClock,
    submission=None,
    states: StateStore | None = None,
    orders: OrdersRepository | None = None,
):
    return submit_order(
        submission or make_submission(),
        orders=orders or stores.orders,
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


# --- The orders database down: the order is findable at once, and claimed only once its row is in


class DownOrdersDatabase:
    """Fault injection: every write of the orders database gives up, as the guard reports it."""

    def __init__(self, inner: OrdersRepository) -> None:
        self.inner = inner

    def insert_if_absent(self, order: OrderRow) -> object:
        raise DependencyUnavailable("orders database", "injected: connection refused")

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class DownStateStore(CrashingStateStore):
    def create_if_absent(self, record: StateRecord) -> Created:
        raise DependencyUnavailable("state store", "injected: connection reset")


def _claimable(stores: Stores, clock: ManualClock) -> list[str]:
    return [s.record.OrderID for s in stores.states.query_claimable(clock.now(), 10)]


def test_an_order_met_by_a_down_orders_database_is_findable_and_not_claimable(
    stores: Stores, clock: ManualClock
) -> None:
    down = DownOrdersDatabase(stores.orders)
    with pytest.raises(DependencyUnavailable):  # the trigger postpones the message, as before
        submit(stores, clock, orders=down)  # type: ignore[arg-type]
    held = stores.states.get("order-1")
    assert held is not None and held.record.ProcessState is ProcessState.PENDING
    assert held.record.Unavailable == "orders database"
    assert held.record.OrderHash == make_submission().order_hash()
    assert stores.orders.get("order-1") is None
    clock.advance(timedelta(days=365))
    assert _claimable(stores, clock) == []  # no attempt runs an order that has no row


def test_the_copy_that_writes_the_row_releases_the_held_record_once(
    stores: Stores, clock: ManualClock
) -> None:
    with pytest.raises(DependencyUnavailable):
        submit(stores, clock, orders=DownOrdersDatabase(stores.orders))  # type: ignore[arg-type]
    with pytest.raises(DependencyUnavailable):  # a second postponed copy, still down: no change
        submit(stores, clock, orders=DownOrdersDatabase(stores.orders))  # type: ignore[arg-type]
    clock.advance(timedelta(minutes=10))
    result = submit(stores, clock)  # the database answers
    assert result.outcome is SubmitOutcome.ACCEPTED and result.stored is not None
    assert result.stored.record.Unavailable is None and result.stored.record.NotBefore is None
    assert stores.orders.get("order-1") is not None
    assert _claimable(stores, clock) == ["order-1"]
    assert submit(stores, clock).outcome is SubmitOutcome.DUPLICATE  # and once only


def test_a_crash_after_the_row_of_a_held_order_is_repaired_by_redelivery(
    stores: Stores, clock: ManualClock
) -> None:
    with pytest.raises(DependencyUnavailable):
        submit(stores, clock, orders=DownOrdersDatabase(stores.orders))  # type: ignore[arg-type]
    with pytest.raises(ConnectionError):  # the row is written, then the process dies
        submit(stores, clock, states=CrashingStateStore(stores.states))  # type: ignore[arg-type]
    assert stores.orders.get("order-1") is not None and _claimable(stores, clock) == []
    assert submit(stores, clock).outcome is SubmitOutcome.ACCEPTED
    assert _claimable(stores, clock) == ["order-1"]


def test_with_both_stores_down_the_submission_is_postponed_with_no_record(
    stores: Stores, clock: ManualClock
) -> None:
    with pytest.raises(DependencyUnavailable) as raised:
        submit(
            stores,
            clock,
            states=DownStateStore(stores.states),  # type: ignore[arg-type]
            orders=DownOrdersDatabase(stores.orders),  # type: ignore[arg-type]
        )
    assert raised.value.dependency == "orders database"
    assert stores.states.get("order-1") is None


def test_a_conflicting_order_is_refused_against_a_held_record(stores: Stores, clock: ManualClock) -> None:
    down = DownOrdersDatabase(stores.orders)
    with pytest.raises(DependencyUnavailable):
        submit(stores, clock, orders=down)  # type: ignore[arg-type]
    result = submit(stores, clock, make_submission(quantity=3), orders=down)  # type: ignore[arg-type]
    assert result.outcome is SubmitOutcome.CONFLICT
    held = stores.states.get("order-1")
    assert held is not None and held.record.OrderHash == make_submission().order_hash()
