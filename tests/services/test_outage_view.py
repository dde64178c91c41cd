"""What an operator sees of an outage (ops.outage_view): the orders waiting on each dependency."""

from dataclasses import replace

from adapters.clock import ManualClock
from domain.states import ProcessState
from ops.outage_view import waiting_on
from tests.support.records import pending, processing
from tests.support.stores import Stores

SQL = "orders database"


def test_orders_are_counted_by_the_dependency_they_wait_on(stores: Stores, clock: ManualClock) -> None:
    now = clock.now()
    for n in range(3):
        stores.states.create_if_absent(replace(pending(f"held-{n}", now), Unavailable=SQL))
    stores.states.create_if_absent(replace(processing("noted", now), Unavailable="compensation log"))
    stores.states.create_if_absent(pending("fine", now))
    done = replace(pending("done", now), ProcessState=ProcessState.PROCESSED, Unavailable=SQL)
    stores.states.create_if_absent(done)  # a finished order waits on nothing, whatever it says

    found = waiting_on(stores.states, limit=10)
    assert found.by_dependency == {"compensation log": 1, SQL: 3}
    assert found.complete


def test_a_count_past_the_limit_says_it_is_a_floor(stores: Stores, clock: ManualClock) -> None:
    for n in range(3):
        stores.states.create_if_absent(replace(pending(f"held-{n}", clock.now()), Unavailable=SQL))
    found = waiting_on(stores.states, limit=3)
    assert found.by_dependency == {SQL: 3} and not found.complete
