from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.sql.orders import sqlite_orders_repository
from adapters.sqlite.state_store import SqliteStateStore
from tests.support.stores import Stores


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    states = SqliteStateStore(tmp_path / "state.db")
    yield Stores(states=states, orders=sqlite_orders_repository(tmp_path / "orders.db"))
    states.close()
