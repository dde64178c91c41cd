"""The orders database (E2): one repository class over any DB-API 2.0 driver.

The SQL uses ``?`` parameters and is valid on SQLite, PostgreSQL and T-SQL alike:
``INSERT ... SELECT ... WHERE NOT EXISTS`` instead of ``ON CONFLICT``, no ``LIMIT``, no
``RETURNING``. What still differs by engine (the schema's column types, how a duplicate key is
reported) is data in ``SqlDialect``, never a second copy of the SQL. The embedded profile runs it
through stdlib ``sqlite3``; the emulators and Azure profiles run the same class through pyodbc.
Money is stored in integer minor units so that no driver's DECIMAL quirks (SQLite-ODBC returns
strings) can change a total.
"""

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol

from adapters.sql.pool import Connection, ConnectionPool
from adapters.sql.schema import ensure_schema
from domain.errors import RecordNotFound
from domain.ports import InsertOutcome, OrderLineRow, OrderRow


class Cursor(Protocol):
    rowcount: int

    def execute(self, sql: str, params: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, params: Any, /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


@dataclass(frozen=True)
class SqlDialect:
    """What differs between engines, as data: the SQL statements themselves are shared."""

    name: str
    # stdlib sqlite3 has no DATETIME2: store sortable ISO text there, datetimes elsewhere.
    datetimes_as_text: bool
    # How the engine reports a duplicate key: the SQLSTATE in ``error.args[0]`` (ODBC drivers
    # that pass the server's own SQLSTATE through), or text in the message.
    duplicate_key_sqlstate: str | None = None
    duplicate_key_texts: tuple[str, ...] = ()

    def is_duplicate_key(self, error: BaseException) -> bool:
        # DB-API 2.0: every driver's exceptions derive from a class named Error (sqlite3.Error,
        # pyodbc.Error); anything else is not the database talking.
        if not any(cls.__name__ == "Error" for cls in type(error).__mro__):
            return False
        if self.duplicate_key_sqlstate is not None and error.args[:1] == (self.duplicate_key_sqlstate,):
            return True
        message = str(error)
        return any(text in message for text in self.duplicate_key_texts)


# sqlite3 raises IntegrityError, the SQLite-ODBC driver a plain pyodbc.Error with SQLSTATE HY000:
# only the message says it is a duplicate ("PRIMARY KEY must be unique" before SQLite 3.8.2).
_SQLITE_DUPLICATE_TEXTS = ("UNIQUE constraint failed", "PRIMARY KEY must be unique")
SQLITE = SqlDialect("sqlite", datetimes_as_text=True, duplicate_key_texts=_SQLITE_DUPLICATE_TEXTS)
# SQLite-ODBC truncates datetime parameters to milliseconds: send text instead.
SQLITE_ODBC = SqlDialect("sqlite-odbc", datetimes_as_text=True, duplicate_key_texts=_SQLITE_DUPLICATE_TEXTS)
# psqlODBC passes the server's SQLSTATE through: 23505 is unique_violation, and only that.
POSTGRESQL = SqlDialect("postgresql", datetimes_as_text=False, duplicate_key_sqlstate="23505")
# ODBC Driver 18 reports every integrity violation as SQLSTATE 23000 (foreign keys and NOT NULL
# too), so the native error number decides, which pyodbc writes as "(2627)" after the message:
# 2627 is a PRIMARY KEY or UNIQUE constraint, 2601 a unique index.
SQLSERVER = SqlDialect("sqlserver", datetimes_as_text=False, duplicate_key_texts=("(2627)", "(2601)"))

_INSERT_ORDER = (
    "INSERT INTO Orders (OrderID, Customer, TotalMinor, StatusQueue, OrderHash, Status,"
    " CreatedAt, UpdatedAt) SELECT ?, ?, ?, ?, ?, ?, ?, ?"
    " WHERE NOT EXISTS (SELECT 1 FROM Orders WHERE OrderID = ?)"
)
_INSERT_LINE = (
    "INSERT INTO OrderLines (OrderID, LineNumber, Sku, Quantity, UnitPriceMinor) VALUES (?, ?, ?, ?, ?)"
)
# Columns are read by position, so PostgreSQL folding unquoted names to lower case changes nothing.
_SELECT_ORDER = (
    "SELECT OrderID, Customer, TotalMinor, StatusQueue, OrderHash, Status, CreatedAt, UpdatedAt"
    " FROM Orders WHERE OrderID = ?"
)
_SELECT_LINES = "SELECT Sku, Quantity, UnitPriceMinor FROM OrderLines WHERE OrderID = ? ORDER BY LineNumber"


def to_minor(amount: Decimal) -> int:
    minor = amount * 100
    if minor != minor.to_integral_value():
        raise ValueError(f"{amount} has more than two decimal places")
    return int(minor)


def from_minor(minor: object) -> Decimal:
    return Decimal(int(str(minor))).scaleb(-2)  # exactly two decimals: 1000 -> 10.00


class SqlOrdersRepository:
    """Orders over DB-API 2.0. ``connect`` opens a new connection; the repository pools them.

    Each method is one transaction, safe to repeat: the insert is keyed by the OrderID and the
    status update by its version, so a guarded caller (``adapters.resilience``) may retry it.
    """

    def __init__(self, connect: Callable[[], Connection], dialect: SqlDialect) -> None:
        self.pool = ConnectionPool(connect)
        self._dialect = dialect

    def close(self) -> None:
        """Close the idle connections; one in use closes when it is given back past the pool's size."""
        self.pool.clear()

    @contextmanager
    def _cursor(self) -> Iterator[Cursor]:
        with self.pool.connection() as conn:
            try:
                cursor: Cursor = conn.cursor()
                yield cursor
                conn.commit()
            except BaseException:
                # A broken connection cannot roll back; the pool drops it.
                with contextlib.suppress(Exception):
                    conn.rollback()
                raise

    def _dt_param(self, moment: datetime) -> object:
        utc = moment.astimezone(UTC).replace(tzinfo=None)
        return utc.isoformat(sep=" ", timespec="microseconds") if self._dialect.datetimes_as_text else utc

    @staticmethod
    def _dt_value(value: object) -> datetime:
        moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
        return moment.replace(tzinfo=UTC)

    def insert_if_absent(self, order: OrderRow) -> InsertOutcome:
        try:
            with self._cursor() as cursor:
                cursor.execute(
                    _INSERT_ORDER,
                    (
                        order.OrderID,
                        order.Customer,
                        to_minor(order.Total),
                        order.StatusQueue,
                        order.OrderHash,
                        order.Status,
                        self._dt_param(order.CreatedAt),
                        self._dt_param(order.UpdatedAt),
                        order.OrderID,
                    ),
                )
                created = cursor.rowcount == 1
                if created:
                    cursor.executemany(
                        _INSERT_LINE,
                        [
                            (order.OrderID, number, line.Sku, line.Quantity, to_minor(line.UnitPrice))
                            for number, line in enumerate(order.Lines, start=1)
                        ],
                    )
        except Exception as error:
            # Two submissions racing past NOT EXISTS: the loser lands here and compares below.
            if not self._dialect.is_duplicate_key(error):
                raise
            created = False
        if created:
            return InsertOutcome.CREATED
        existing = self.get(order.OrderID)
        if existing is not None and existing.OrderHash == order.OrderHash:
            return InsertOutcome.EXISTS_MATCHING
        return InsertOutcome.CONFLICT

    def get(self, order_id: str) -> OrderRow | None:
        with self._cursor() as cursor:
            cursor.execute(_SELECT_ORDER, (order_id,))
            row = cursor.fetchone()
            if row is None:
                return None
            cursor.execute(_SELECT_LINES, (order_id,))
            lines = cursor.fetchall()
        order_id_, customer, total, status_queue, order_hash, status, created, updated = row
        return OrderRow(
            OrderID=str(order_id_),
            Customer=str(customer),
            Total=from_minor(total),
            StatusQueue=str(status_queue),
            OrderHash=str(order_hash).strip(),
            Status=str(status),
            Lines=tuple(
                OrderLineRow(Sku=str(sku), Quantity=int(qty), UnitPrice=from_minor(price))
                for sku, qty, price in lines
            ),
            CreatedAt=self._dt_value(created),
            UpdatedAt=self._dt_value(updated),
        )

    def update_status(self, order_id: str, status: str, now: datetime, *, version: int) -> bool:
        with self._cursor() as cursor:
            cursor.execute(
                "UPDATE Orders SET Status = ?, StatusVersion = ?, UpdatedAt = ?"
                " WHERE OrderID = ? AND StatusVersion <= ?",
                (status, version, self._dt_param(now), order_id, version),
            )
            if cursor.rowcount > 0:
                return True
            cursor.execute("SELECT 1 FROM Orders WHERE OrderID = ?", (order_id,))
            if cursor.fetchone() is None:
                raise RecordNotFound(f"no order {order_id}")
            return False


def sqlite_orders_repository(path: str | Path) -> SqlOrdersRepository:
    """The embedded profile's orders database: the same class, through stdlib sqlite3."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)

    def connect() -> sqlite3.Connection:
        # Pooled: used by one thread at a time, but not always the one that opened it.
        conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
        conn.execute("PRAGMA foreign_keys=ON")
        # NORMAL (WAL), as the state store beside it: every submission writes here, and FULL's
        # fsync inside the write lock was what a burst's worker processes waited on next
        # (docs/capacity.md). A killed process loses no commit (tests/contract/test_state_store_kill.py).
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    setup = connect()
    try:
        setup.execute("PRAGMA journal_mode=WAL")
        ensure_schema(setup, SQLITE.name)  # an embedded database is the app's own: made at first open
    finally:
        setup.close()
    return SqlOrdersRepository(connect, SQLITE)


def pyodbc_orders_repository(
    connection_string: str,
    dialect: SqlDialect,
    schema: str | None = None,
    *,
    login_timeout: int = 15,
    query_timeout: int = 15,
    attrs_before: Callable[[], dict[int, Any]] | None = None,
) -> SqlOrdersRepository:
    """The same repository through pyodbc (Azure SQL with ODBC Driver 18, PostgreSQL, SQLite-ODBC).

    ``schema``: DDL to run first (tests and local set-up: ``SQLITE_SCHEMA``, ``POSTGRESQL_SCHEMA``);
    in Azure the post-provision script owns it. The timeouts (seconds) bound a server that
    accepts the connection and then says nothing: without them a call would hang for as long
    as the TCP connection lives, past the message lock and the step window. ``attrs_before``:
    connection attributes made for each new connection (a fresh Entra access token each time:
    ``adapters.azure_profile.sql_access_token``).
    """
    import pyodbc  # noqa: PLC0415 - only the profiles that use ODBC need the driver manager

    def connect() -> Connection:
        before = {"attrs_before": attrs_before()} if attrs_before else {}
        connection = pyodbc.connect(connection_string, autocommit=False, timeout=login_timeout, **before)
        # SQL_ATTR_CONNECTION_TIMEOUT: ODBC Driver 18 and SQLite-ODBC have it. psqlODBC does not:
        # libpq's own options bound it there, in the connection string (docs/operating.md "Transient faults").
        with contextlib.suppress(pyodbc.Error):
            connection.timeout = query_timeout
        pooled: Connection = connection
        return pooled

    if schema:
        setup = connect()
        try:
            cursor = setup.cursor()
            for statement in (s.strip() for s in schema.split(";")):
                if statement:
                    cursor.execute(statement)
            setup.commit()
        finally:
            setup.close()
    return SqlOrdersRepository(connect, dialect)
