"""The OrdersRepository contract: insert-if-absent, compare, never overwrite."""

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest

from domain.errors import RecordNotFound
from domain.order_status import status_version
from domain.ports import InsertOutcome, OrderLineRow, OrdersRepository
from tests.support.clock import T0
from tests.support.orders import order


def test_insert_then_get_round_trips_exact_values(orders_repository: OrdersRepository) -> None:
    assert orders_repository.insert_if_absent(order()) is InsertOutcome.CREATED
    assert orders_repository.get("o-1") == order()
    assert orders_repository.get("unknown") is None


def test_a_repeat_with_the_same_data_is_a_match(orders_repository: OrdersRepository) -> None:
    orders_repository.insert_if_absent(order())
    later = replace(order(), CreatedAt=T0 + timedelta(hours=1), UpdatedAt=T0 + timedelta(hours=1))
    assert orders_repository.insert_if_absent(later) is InsertOutcome.EXISTS_MATCHING
    assert orders_repository.get("o-1") == order()


def test_different_data_under_the_same_id_is_a_conflict_and_changes_nothing(
    orders_repository: OrdersRepository,
) -> None:
    orders_repository.insert_if_absent(order())
    other = replace(
        order(order_hash="b" * 64),
        Customer="Fabrikam",
        Lines=(OrderLineRow(Sku="SKU-9", Quantity=9, UnitPrice=Decimal("1.00")),),
    )
    assert orders_repository.insert_if_absent(other) is InsertOutcome.CONFLICT
    assert orders_repository.get("o-1") == order()


RACERS = 10


def _race(insert: Callable[[int], InsertOutcome]) -> list[InsertOutcome]:
    """Runs ``insert(i)`` on RACERS threads released together, so their INSERTs overlap: on
    PostgreSQL some get past NOT EXISTS and lose on the primary key instead (SQLSTATE 23505).
    Returns the outcomes by ``i``; a thread that raised leaves a gap, which fails the lookup."""
    barrier = threading.Barrier(RACERS)
    outcomes: dict[int, InsertOutcome] = {}

    def run(i: int) -> None:
        barrier.wait()
        outcomes[i] = insert(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [outcomes[i] for i in range(RACERS)]


def test_concurrent_inserts_of_one_order_create_it_once(orders_repository: OrdersRepository) -> None:
    outcomes = _race(lambda i: orders_repository.insert_if_absent(order()))
    assert outcomes.count(InsertOutcome.CREATED) == 1
    assert outcomes.count(InsertOutcome.EXISTS_MATCHING) == RACERS - 1
    assert orders_repository.get("o-1") == order()


def test_concurrent_inserts_of_different_data_under_one_id_keep_exactly_one(
    orders_repository: OrdersRepository,
) -> None:
    candidates = [order(order_hash=f"{i:064x}") for i in range(RACERS)]
    outcomes = _race(lambda i: orders_repository.insert_if_absent(candidates[i]))
    assert outcomes.count(InsertOutcome.CREATED) == 1
    assert outcomes.count(InsertOutcome.CONFLICT) == RACERS - 1
    assert orders_repository.get("o-1") == candidates[outcomes.index(InsertOutcome.CREATED)]


def test_update_status(orders_repository: OrdersRepository) -> None:
    orders_repository.insert_if_absent(order())
    confirmed = status_version(1, "Confirmed")
    assert orders_repository.update_status("o-1", "Confirmed", T0 + timedelta(minutes=3), version=confirmed)
    stored = orders_repository.get("o-1")
    assert stored is not None
    assert stored.Status == "Confirmed" and stored.UpdatedAt == T0 + timedelta(minutes=3)
    # The same write again (an activity retried) is harmless.
    assert orders_repository.update_status("o-1", "Confirmed", T0 + timedelta(minutes=4), version=confirmed)
    with pytest.raises(RecordNotFound):
        orders_repository.update_status("unknown", "Confirmed", T0, version=confirmed)


def test_a_stale_status_write_never_replaces_a_newer_one(orders_repository: OrdersRepository) -> None:
    orders_repository.insert_if_absent(order())
    later = T0 + timedelta(minutes=5)
    # Attempt 1 expired and the Supervisor gave up on it: Failed, at attempt 1's end.
    assert orders_repository.update_status("o-1", "Failed", later, version=status_version(1, "Failed"))
    # ... then attempt 1's ConfirmOrder, which read the record before the give-up, lands late.
    stale = status_version(1, "Confirmed")
    assert not orders_repository.update_status(
        "o-1", "Confirmed", later + timedelta(seconds=1), version=stale
    )
    stored = orders_repository.get("o-1")
    assert stored is not None and (stored.Status, stored.UpdatedAt) == ("Failed", later)
    # An operator's resubmit starts attempt 2, whose writes outrank everything of attempt 1.
    assert orders_repository.update_status("o-1", "Confirmed", later, version=status_version(2, "Confirmed"))
    assert not orders_repository.update_status("o-1", "Shipped", later, version=status_version(1, "Shipped"))
    stored = orders_repository.get("o-1")
    assert stored is not None and stored.Status == "Confirmed"
