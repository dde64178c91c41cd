"""What differs between SQL engines under the one orders repository: how each reports a duplicate
key, and how Azure SQL is reached.

SQLite (sqlite3 and ODBC) and PostgreSQL (psqlODBC) are real engines in these tests. **There is
no SQL Server engine in CI** (none runs without Docker), so the sqlserver dialect is checked
with small fakes: errors shaped exactly as pyodbc formats ODBC Driver 18's messages ("[SQLSTATE]
message (native error) (function)"), and a stand-in for ``pyodbc.connect`` that records the
connection string. They prove the mapping and the settings path, not the driver or the server.
"""

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyodbc
import pytest
from tenacity import Retrying, stop_after_delay, wait_fixed

from adapters.azure_profile import MissingSetting, azure_sql_connection_string, sql_orders_repository
from adapters.sql.orders import (
    POSTGRESQL,
    SQLITE,
    SQLITE_ODBC,
    SQLSERVER,
    Connection,
    SqlDialect,
    SqlOrdersRepository,
    pyodbc_orders_repository,
    sqlite_orders_repository,
)
from adapters.sql.schema import POSTGRESQL_SCHEMA, SQLITE_SCHEMA
from domain.ports import InsertOutcome
from settings import Settings
from tests.support.emulators import new_postgres_database
from tests.support.orders import order
from tests.support.tiers import backend_params

# --- the real engines: each one's duplicate-key error is recognised, and only that error ---

Engine = tuple[SqlOrdersRepository, Callable[[], Connection], SqlDialect]


def _sqlite3(tmp: Path, request: pytest.FixtureRequest) -> Engine:
    path = tmp / "orders.db"
    return sqlite_orders_repository(path), lambda: sqlite3.connect(path), SQLITE


def _pyodbc_sqlite(tmp: Path, request: pytest.FixtureRequest) -> Engine:
    database = f"Driver={{SQLite3}};Database={tmp / 'orders-odbc.db'}"
    repository = pyodbc_orders_repository(database, SQLITE_ODBC, SQLITE_SCHEMA)
    return repository, lambda: pyodbc.connect(database), SQLITE_ODBC


def _pyodbc_postgresql(tmp: Path, request: pytest.FixtureRequest) -> Engine:
    database = new_postgres_database(request.getfixturevalue("postgres_odbc"))
    repository = pyodbc_orders_repository(database, POSTGRESQL, POSTGRESQL_SCHEMA)
    return repository, lambda: pyodbc.connect(database), POSTGRESQL


ENGINES: dict[str, Callable[[Path, pytest.FixtureRequest], Engine]] = {
    "sqlite3": _sqlite3,
    "pyodbc-sqlite": _pyodbc_sqlite,
    "pyodbc-postgresql": _pyodbc_postgresql,
}

_INSERT_LINE = (
    "INSERT INTO OrderLines (OrderID, LineNumber, Sku, Quantity, UnitPriceMinor) VALUES (?, ?, ?, ?, ?)"
)


def _error_of(connect: Callable[[], Connection], params: tuple[Any, ...]) -> Exception:
    conn = connect()
    try:
        # Each driver raises its own classes: sqlite3.IntegrityError, pyodbc.Error, pyodbc.IntegrityError.
        with pytest.raises(Exception) as raised:
            conn.cursor().execute(_INSERT_LINE, params)
        conn.rollback()
        return raised.value
    finally:
        conn.close()


# The SQLite ODBC driver and PostgreSQL come from make system-deps.
@pytest.mark.parametrize("engine", backend_params(ENGINES, emulated={"pyodbc-sqlite", "pyodbc-postgresql"}))
def test_each_engines_duplicate_key_error_is_recognised_and_no_other(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    repository, connect, dialect = ENGINES[engine](tmp_path, request)
    repository.insert_if_absent(order())  # lines 1 and 2 of o-1
    duplicate = _error_of(connect, ("o-1", 1, "SKU-1", 1, 1005))
    assert dialect.is_duplicate_key(duplicate), repr(duplicate)
    # Another integrity error must not pass for a duplicate: it would be reported as a conflict.
    missing_sku = _error_of(connect, ("o-1", 3, None, 1, 1005))
    assert not dialect.is_duplicate_key(missing_sku), repr(missing_sku)


@pytest.fixture
def postgres_orders(postgres_odbc: str) -> Iterator[tuple[SqlOrdersRepository, str]]:
    database = new_postgres_database(postgres_odbc)
    yield pyodbc_orders_repository(database, POSTGRESQL, POSTGRESQL_SCHEMA), database


def _wait_for_a_lock_wait(database: str) -> None:
    watcher = pyodbc.connect(database, autocommit=True)
    here = "datname = current_database()"
    waiting = f"SELECT count(*) FROM pg_stat_activity WHERE {here} AND wait_event_type = 'Lock'"
    try:
        for attempt in Retrying(stop=stop_after_delay(10), wait=wait_fixed(0.02), reraise=True):
            with attempt:
                assert watcher.execute(waiting).fetchone()[0], (
                    "the racing INSERT never waited on the primary key"
                )
    finally:
        watcher.close()


@pytest.mark.emulators  # PostgreSQL
@pytest.mark.parametrize(
    ("order_hash", "expected"),
    [("a" * 64, InsertOutcome.EXISTS_MATCHING), ("b" * 64, InsertOutcome.CONFLICT)],
    ids=["same-data", "other-data"],
)
def test_on_postgresql_an_insert_that_loses_on_the_primary_key_reads_the_winner(
    postgres_orders: tuple[SqlOrdersRepository, str], order_hash: str, expected: InsertOutcome
) -> None:
    """The race the concurrency contract test only sometimes produces, made certain: the winner's
    row exists but is uncommitted, so the loser's NOT EXISTS passes and its INSERT waits on the
    primary key; when the winner commits, PostgreSQL fails it with 23505."""
    repository, database = postgres_orders
    winner = pyodbc.connect(database, autocommit=False)
    try:
        created = order().CreatedAt.replace(tzinfo=None)
        winner.execute(
            "INSERT INTO Orders (OrderID, Customer, TotalMinor, StatusQueue, OrderHash, Status,"
            " CreatedAt, UpdatedAt) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ("o-1", "Contoso Ltd", 3005, "status-app-a", "a" * 64, "Received", created, created),
        )
        outcome: list[InsertOutcome] = []
        loser = threading.Thread(
            target=lambda: outcome.append(repository.insert_if_absent(order(order_hash=order_hash)))
        )
        loser.start()
        _wait_for_a_lock_wait(database)
        winner.cursor().executemany(
            _INSERT_LINE, [("o-1", 1, "SKU-1", 1, 1005), ("o-1", 2, "SKU-2", 2, 1000)]
        )
        winner.commit()
        loser.join(timeout=10)
    finally:
        winner.close()
    assert outcome == [expected]
    assert repository.get("o-1") == order()


# --- SQL Server: fakes only (no engine without Docker, none in CI) ---


class Error(Exception):
    """pyodbc's base class, by name: DB-API 2.0 drivers all derive their errors from ``Error``."""


class IntegrityError(Error):
    pass


def sqlserver_error(native: int, message: str) -> IntegrityError:
    # What pyodbc raises for ODBC Driver 18: every integrity violation is SQLSTATE 23000.
    text = (
        f"[23000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]{message} ({native}) (SQLExecDirectW)"
    )
    return IntegrityError("23000", text)


PK_VIOLATION = sqlserver_error(
    2627,
    "Violation of PRIMARY KEY constraint 'PK_Orders'. Cannot insert duplicate key in object "
    "'dbo.Orders'. The duplicate key value is (o-1).",
)
UNIQUE_INDEX_VIOLATION = sqlserver_error(
    2601, "Cannot insert duplicate key row in object 'dbo.Orders' with unique index 'IX_Orders'."
)
FOREIGN_KEY_VIOLATION = sqlserver_error(
    547, 'The INSERT statement conflicted with the FOREIGN KEY constraint "FK_OrderLines_Orders".'
)
NULL_VIOLATION = sqlserver_error(515, "Cannot insert the value NULL into column 'Sku'.")


def test_sqlserver_duplicate_keys_are_2627_and_2601_only() -> None:
    assert SQLSERVER.is_duplicate_key(PK_VIOLATION)
    assert SQLSERVER.is_duplicate_key(UNIQUE_INDEX_VIOLATION)
    assert not SQLSERVER.is_duplicate_key(FOREIGN_KEY_VIOLATION)
    assert not SQLSERVER.is_duplicate_key(NULL_VIOLATION)
    # Not a database error at all, whatever its text says.
    assert not SQLSERVER.is_duplicate_key(ValueError("(2627)"))


def azure_settings(**values: str) -> Settings:
    env = {"SAS_PROFILE": "azure", "SAS_SQL_DIALECT": "sqlserver"}
    return Settings.from_env(env | values)


SERVER = "Server=tcp:sql-sas.database.windows.net,1433;Database=orders"
CLIENT_ID = "00000000-0000-0000-0000-0000000000c1"


def test_azure_sql_needs_only_the_server_and_the_identity() -> None:
    settings = azure_settings(SqlConnection=SERVER, AZURE_CLIENT_ID=CLIENT_ID)
    assert azure_sql_connection_string(settings) == (
        f"{SERVER};Driver={{ODBC Driver 18 for SQL Server}};Encrypt=yes;"
        f"Authentication=ActiveDirectoryMsi;UID={CLIENT_ID}"
    )


def test_azure_sql_keeps_what_the_setting_already_says() -> None:
    given = (
        f"Driver={{ODBC Driver 18 for SQL Server}};{SERVER};Encrypt=strict;Authentication=ActiveDirectoryMsi;"
    )
    settings = azure_settings(SqlConnection=given, AZURE_CLIENT_ID=CLIENT_ID)
    assert azure_sql_connection_string(settings) == f"{given.rstrip(';')};UID={CLIENT_ID}"
    explicit_uid = f"{SERVER};Authentication=ActiveDirectoryMsi;UID=other-client-id"
    settings = azure_settings(SqlConnection=explicit_uid, AZURE_CLIENT_ID=CLIENT_ID)
    assert azure_sql_connection_string(settings).endswith(
        "UID=other-client-id;Driver={ODBC Driver 18 for SQL Server};Encrypt=yes"
    )


def test_azure_sql_refuses_a_password_and_names_no_secret() -> None:
    settings = azure_settings(SqlConnection=f"{SERVER};UID=sa;PWD={{s3cr;et}}", AZURE_CLIENT_ID=CLIENT_ID)
    with pytest.raises(ValueError, match="must not hold a password") as raised:
        azure_sql_connection_string(settings)
    assert "s3cr" not in str(raised.value)


def test_azure_sql_refuses_an_unencrypted_connection() -> None:
    settings = azure_settings(SqlConnection=f"{SERVER};Encrypt=no", AZURE_CLIENT_ID=CLIENT_ID)
    with pytest.raises(ValueError, match="Encrypt=yes"):
        azure_sql_connection_string(settings)


def test_azure_sql_without_the_identity_names_the_missing_setting() -> None:
    with pytest.raises(MissingSetting, match="AZURE_CLIENT_ID"):
        azure_sql_connection_string(azure_settings(SqlConnection=SERVER))


def test_a_local_sql_server_container_may_use_a_sql_login() -> None:
    """The emulators profile with the sqlserver dialect: a SQL Server container has no Entra ID."""
    local = "Server=127.0.0.1,1433;Database=orders;UID=sa;PWD=Local-only1;TrustServerCertificate=yes"
    settings = Settings.from_env(
        {"SAS_PROFILE": "emulators", "SAS_SQL_DIALECT": "sqlserver", "SqlConnection": local}
    )
    assert (
        azure_sql_connection_string(settings)
        == f"{local};Driver={{ODBC Driver 18 for SQL Server}};Encrypt=yes"
    )


# The columns information_schema reports for the schema the post-provision step made.
DEPLOYED_COLUMNS = {
    "orders": ("OrderID", "Customer", "TotalMinor", "StatusQueue", "OrderHash", "Status", "StatusVersion",
               "CreatedAt", "UpdatedAt"),
    "orderlines": ("OrderID", "LineNumber", "Sku", "Quantity", "UnitPriceMinor"),
}  # fmt: skip


class FakeAzureSql:
    """Stands in for ``pyodbc.connect``: the schema is deployed (the app checks it, as on SQL
    Server it creates nothing), and o-1 was committed by another instance after this one's NOT
    EXISTS ran, so the INSERT fails with 2627 and the read finds the winner's row."""

    def __init__(self) -> None:
        self.connection_strings: list[str] = []
        self.rows: list[tuple[Any, ...]] = []

    def connect(self, connection_string: str, autocommit: bool, timeout: int) -> "FakeAzureSql":
        self.connection_strings.append(connection_string)
        self.login_timeout = timeout
        return self

    def cursor(self) -> "FakeAzureSql":
        return self

    def execute(self, sql: str, params: tuple[Any, ...]) -> None:
        stored = order()
        created = stored.CreatedAt.replace(tzinfo=None)
        if "information_schema.columns" in sql:
            self.rows = [(column,) for column in DEPLOYED_COLUMNS[str(params[0])]]
            return
        if sql.startswith("INSERT INTO Orders"):
            raise PK_VIOLATION
        if "FROM Orders" in sql:
            self.rows = [
                ("o-1", "Contoso Ltd", 3005, "status-app-a", stored.OrderHash, "Received", created, created)
            ]
        elif "FROM OrderLines" in sql:
            self.rows = [("SKU-1", 1, 1005), ("SKU-2", 2, 1000)]

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_sqlserver_settings_path_connects_with_the_identity_and_maps_2627(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeAzureSql()
    monkeypatch.setattr(pyodbc, "connect", fake.connect)
    repository = sql_orders_repository(azure_settings(SqlConnection=SERVER, AZURE_CLIENT_ID=CLIENT_ID))
    assert repository.insert_if_absent(order()) is InsertOutcome.EXISTS_MATCHING
    assert repository.get("o-1") == order()
    assert fake.connection_strings
    for connection_string in fake.connection_strings:
        assert f"Authentication=ActiveDirectoryMsi;UID={CLIENT_ID}" in connection_string
        assert "PWD" not in connection_string.upper()
