from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.sql.orders import SqlOrdersRepository, sqlite_orders_repository
from adapters.sqlite.state_store import SqliteStateStore


@dataclass
class Stores:
    states: SqliteStateStore
    orders: SqlOrdersRepository


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    states = SqliteStateStore(tmp_path / "state.db")
    yield Stores(states=states, orders=sqlite_orders_repository(tmp_path / "orders.db"))
    states.close()
