"""An embedded orders database made before ``Orders.StatusVersion`` existed is upgraded in place."""

import sqlite3
from pathlib import Path

from adapters.sql.orders import sqlite_orders_repository
from adapters.sql.schema import SQLITE_SCHEMA
from domain.order_status import status_version
from tests.support.clock import T0


def test_an_orders_database_without_status_versions_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "orders.db"
    old_schema = SQLITE_SCHEMA.replace("    StatusVersion INT        NOT NULL DEFAULT 0,\n", "")
    assert "StatusVersion" not in old_schema
    with sqlite3.connect(path) as old:
        old.executescript(old_schema)
        old.execute(
            "INSERT INTO Orders (OrderID, Customer, TotalMinor, StatusQueue, OrderHash, Status,"
            " CreatedAt, UpdatedAt) VALUES ('o-1', 'C', 100, 'status-app-a', ?, 'Received', ?, ?)",
            ("0" * 64, T0.isoformat(), T0.isoformat()),
        )
    orders = sqlite_orders_repository(path)
    assert orders.update_status("o-1", "Confirmed", T0, version=status_version(1, "Confirmed"))
    stored = orders.get("o-1")
    assert stored is not None and stored.Status == "Confirmed"
    sqlite_orders_repository(path)  # opening it again changes nothing
