"""Adapters under contract. Each port's suite runs over every adapter listed here.

Adding a backend (Cosmos, pyodbc, Table Storage) means adding one factory to the list; the
assertions stay the same.
"""

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from adapters.sql_orders import SqlOrdersRepository, sqlite_orders_repository
from adapters.sqlite_compensation_log import SqliteCompensationLog
from adapters.sqlite_state_store import SqliteStateStore
from domain.ports import CompensationLog, OrdersRepository, StateStore

StateStoreFactory = Callable[[Path], StateStore]

STATE_STORES: dict[str, StateStoreFactory] = {
    "sqlite": lambda tmp: SqliteStateStore(tmp / "state.db"),
}
ORDERS_REPOSITORIES: dict[str, Callable[[Path], SqlOrdersRepository]] = {
    "sqlite3": lambda tmp: sqlite_orders_repository(tmp / "orders.db"),
}
COMPENSATION_LOGS: dict[str, Callable[[Path], CompensationLog]] = {
    "sqlite": lambda tmp: SqliteCompensationLog(tmp / "compensation.db"),
}


def _close(adapter: object) -> None:
    close = getattr(adapter, "close", None)
    if close is not None:
        close()


@pytest.fixture(params=sorted(STATE_STORES))
def state_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    store = STATE_STORES[request.param](tmp_path)
    yield store
    _close(store)


@pytest.fixture(params=sorted(ORDERS_REPOSITORIES))
def orders_repository(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OrdersRepository]:
    repository = ORDERS_REPOSITORIES[request.param](tmp_path)
    yield repository
    _close(repository)


@pytest.fixture(params=sorted(COMPENSATION_LOGS))
def compensation_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CompensationLog]:
    log = COMPENSATION_LOGS[request.param](tmp_path)
    yield log
    _close(log)
