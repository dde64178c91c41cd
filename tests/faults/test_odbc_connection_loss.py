"""The orders database's connection reset while a statement is in flight, through the fault proxy
(harness/standins/fault_proxy.py): real pyodbc, psqlODBC and PostgreSQL. What the driver raises must be
a transient fault (adapters/resilience.py), so the guarded repository retries it on a new connection,
or gives up with DependencyUnavailable; never the driver's own error (issue 51).

Each test holds the statement with a stall on a live pooled connection, waits until the proxy holds
its bytes, then resets the connection: the reset lands mid-statement every time, with no sleep."""

import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyodbc
import pytest

from adapters.resilience import RetryPolicy, guard, is_transient
from adapters.sql.orders import POSTGRESQL, SqlOrdersRepository, pyodbc_orders_repository
from adapters.sql.schema import POSTGRESQL_SCHEMA
from domain.errors import DependencyUnavailable
from domain.ports import InsertOutcome
from harness.standins.fault_proxy import FaultProxy
from tests.support.clock import T0
from tests.support.emulators import new_postgres_database
from tests.support.orders import order

pytestmark = pytest.mark.emulators  # PostgreSQL

ORDERS = "orders database"


@pytest.fixture
def proxied(postgres_odbc: str) -> Iterator[tuple[FaultProxy, SqlOrdersRepository]]:
    """A proxy in front of a fresh orders database, and the repository as the app builds it,
    through the proxy, with one order stored and a live connection in its pool."""
    database = new_postgres_database(postgres_odbc)
    port = re.search(r"Port=(\d+)", database)
    assert port is not None
    with FaultProxy(("127.0.0.1", int(port[1]))) as proxy:
        through = database.replace(f"Port={port[1]}", f"Port={proxy.port}")
        orders = pyodbc_orders_repository(through, POSTGRESQL, POSTGRESQL_SCHEMA)
        assert orders.insert_if_absent(order("o-stored")) == InsertOutcome.CREATED
        yield proxy, orders
        orders.close()


def _reset_in_flight(proxy: FaultProxy, pool: ThreadPoolExecutor, call: Callable[[], Any]) -> Future[Any]:
    """Starts ``call``, holds its first statement in a stall, and resets the connection under it."""
    proxy.set_mode("stall")
    outcome = pool.submit(call)
    proxy.wait_for(lambda stats: stats.held_bytes_to_target > 0)  # the statement is on the wire
    proxy.set_mode("reset")
    return outcome


OPERATIONS: dict[str, Callable[[SqlOrdersRepository], Any]] = {
    "insert_if_absent": lambda orders: orders.insert_if_absent(order("o-new")),
    "get": lambda orders: orders.get("o-stored"),
    "update_status": lambda orders: orders.update_status("o-stored", "Processing", T0, version=1),
}


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_statement_reset_in_flight_raises_a_transient_fault(
    proxied: tuple[FaultProxy, SqlOrdersRepository], operation: str
) -> None:
    proxy, orders = proxied
    with ThreadPoolExecutor(1) as pool:
        error = _reset_in_flight(proxy, pool, lambda: OPERATIONS[operation](orders)).exception(timeout=10)
    assert isinstance(error, pyodbc.Error), error
    assert is_transient(error), error.args
    proxy.set_mode("pass")
    # The pool dropped the dead connection: the next call dials a new one rather than failing on it.
    assert orders.get("o-stored") is not None and orders.pool.opened == 2


class Outages:
    """An OutageObserver that records what the guard tells it."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def unavailable(self, dependency: str, error: BaseException) -> None:
        self.events.append(f"{dependency} down")

    def available(self, dependency: str) -> None:
        self.events.append(f"{dependency} up")

    def is_down(self, dependency: str) -> bool:
        return bool(self.events) and self.events[-1] == f"{dependency} down"


def test_the_guarded_repository_retries_a_reset_statement_once_the_proxy_passes(
    proxied: tuple[FaultProxy, SqlOrdersRepository],
) -> None:
    proxy, orders = proxied
    waits: list[float] = []

    def heal_then_wait(seconds: float) -> None:
        # The guard's back-off, in virtual time: the partition heals while the call waits to retry.
        waits.append(seconds)
        proxy.set_mode("pass")

    policy = RetryPolicy(budget=10, sleep=heal_then_wait)
    outages = Outages()
    guarded = guard(lambda: orders, ORDERS, policy, outages)
    with ThreadPoolExecutor(1) as pool:
        outcome = _reset_in_flight(proxy, pool, lambda: guarded.insert_if_absent(order("o-new")))
        assert outcome.result(timeout=10) == InsertOutcome.CREATED
    assert len(waits) == 1 and outages.events == [f"{ORDERS} up"]
    assert orders.pool.opened == 2  # the retry dialled a new connection
    stored = orders.get("o-new")
    assert stored is not None and len(stored.Lines) == 2


def test_the_guarded_repository_gives_up_with_dependency_unavailable_while_resets_go_on(
    proxied: tuple[FaultProxy, SqlOrdersRepository],
) -> None:
    proxy, orders = proxied
    # A short budget, with real waits between tries as in production (0.01 s doubling to 0.05 s).
    policy = RetryPolicy(budget=0.5, first_wait=0.01, max_wait=0.05)
    outages = Outages()
    guarded = guard(lambda: orders, ORDERS, policy, outages)
    with ThreadPoolExecutor(1) as pool:
        error = _reset_in_flight(proxy, pool, lambda: guarded.get("o-stored")).exception(timeout=10)
    assert type(error) is DependencyUnavailable, error
    assert isinstance(error.__cause__, pyodbc.Error) and is_transient(error.__cause__)
    assert outages.events == [f"{ORDERS} down"]
    # The later tries each dialled a connection that the proxy reset at once: none was opened.
    assert orders.pool.opened == 1 and proxy.stats().reset >= 2
    proxy.set_mode("pass")  # the outage ends: the next call succeeds, and says so
    assert guarded.get("o-stored") is not None
    assert outages.events == [f"{ORDERS} down", f"{ORDERS} up"]
