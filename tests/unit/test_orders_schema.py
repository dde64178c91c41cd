"""The orders database's schema is the app's: ``ops schema`` creates and migrates it idempotently,
and a database without it is "not ready" (an outage that holds orders back), never an order lost."""

import io
import sqlite3
from pathlib import Path

import pytest
from rich.console import Console

from adapters.resilience import RetryPolicy, guard, is_transient
from adapters.sql.schema import SQLITE_SCHEMA, SchemaMissing, check_schema, ensure_schema, script
from domain.errors import DependencyUnavailable
from ops.__main__ import main

OLD_SCHEMA = SQLITE_SCHEMA.replace("    StatusVersion INT        NOT NULL DEFAULT 0,\n", "")


def test_ensure_schema_creates_the_tables_then_changes_nothing(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "orders.db")
    assert ensure_schema(connection, "sqlite") == ["created table Orders", "created table OrderLines"]
    assert ensure_schema(connection, "sqlite") == []
    check_schema(connection, "sqlite")


def test_ensure_schema_adds_a_column_an_older_database_lacks(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "orders.db")
    connection.executescript(OLD_SCHEMA)
    with pytest.raises(SchemaMissing, match=r"no column Orders\.StatusVersion"):
        check_schema(connection, "sqlite")
    assert ensure_schema(connection, "sqlite") == ["added column Orders.StatusVersion"]
    check_schema(connection, "sqlite")


def test_a_missing_table_is_the_orders_database_not_being_ready(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "empty.db")
    with pytest.raises(SchemaMissing) as missing:
        check_schema(connection, "sqlite")
    assert "no table Orders" in str(missing.value) and "python -m ops schema" in str(missing.value)
    # An outage, as a database that is down: the intake postpones the order to a later delivery
    # (function_app.submit_order, intake.postpone) instead of dead-lettering it.
    assert isinstance(missing.value, DependencyUnavailable) and is_transient(missing.value)


def test_a_repository_built_on_a_database_without_its_schema_raises_an_outage(tmp_path: Path) -> None:
    class Observer:
        def __init__(self) -> None:
            self.down: list[str] = []

        def unavailable(self, dependency: str, error: BaseException) -> None:
            self.down.append(dependency)

        def available(self, dependency: str) -> None: ...

        def is_down(self, dependency: str) -> bool:
            return False

    def build() -> object:
        check_schema(sqlite3.connect(tmp_path / "empty.db"), "sqlite")
        return object()

    observer = Observer()
    orders = guard(
        build, "orders database", RetryPolicy(budget=0, first_wait=0.001, max_wait=0.001), observer
    )
    with pytest.raises(DependencyUnavailable, match="no table Orders"):
        orders.insert_order()  # type: ignore[attr-defined]
    assert observer.down == ["orders database"]


def test_the_provisioned_tsql_script_is_the_apps(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    assert (root / "infra" / "sql" / "schema.sql").read_text() == script("sqlserver")
    out = io.StringIO()
    assert main(["schema", "--script", "sqlserver"], Console(file=out)) == 0
    assert out.getvalue() == script("sqlserver")


def test_ops_schema_creates_the_embedded_database_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAS_PROFILE", "embedded")
    monkeypatch.setenv("SAS_DATA_DIR", str(tmp_path))
    first, again = io.StringIO(), io.StringIO()
    assert main(["schema"], Console(file=first, width=200)) == 0
    assert main(["schema"], Console(file=again, width=200)) == 0
    assert "created" in first.getvalue() and "up to date" in again.getvalue()
    check_schema(sqlite3.connect(tmp_path / "orders.db"), "sqlite")
