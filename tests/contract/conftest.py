"""Adapters under contract. Each port's suite runs over every adapter listed here.

Adding a backend (Cosmos, pyodbc, Table Storage) means adding one factory to the list; the
assertions stay the same.
"""

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from azure.cosmos import CosmosClient, PartitionKey
from azure.data.tables import TableServiceClient

from adapters.cosmos import recovery_index as cosmos_recovery_index
from adapters.cosmos.recovery_index import CosmosRecoveryIndex
from adapters.cosmos.state_store import CONTAINER, PARTITION_KEY_PATH, CosmosStateStore
from adapters.sql.orders import (
    POSTGRESQL,
    SQLITE_ODBC,
    SqlOrdersRepository,
    pyodbc_orders_repository,
    sqlite_orders_repository,
)
from adapters.sql.schema import POSTGRESQL_SCHEMA, SQLITE_SCHEMA
from adapters.sqlite.compensation_log import SqliteCompensationLog
from adapters.sqlite.recovery_index import SqliteRecoveryIndex
from adapters.sqlite.state_store import SqliteStateStore
from adapters.storage.compensation_log import TABLE, TableCompensationLog
from domain.ports import CompensationLog, OrdersRepository, RecoveryIndex, StateStore
from services.indexed_state_store import IndexedStateStore
from tests.support.emulators import new_postgres_database
from tests.support.tiers import backend_params


def _cosmos_store(client: CosmosClient) -> StateStore:
    database = client.create_database_if_not_exists("sas")
    # A container per test: the contract tests assume an empty store.
    container = database.create_container(
        f"{CONTAINER}-{uuid.uuid4().hex[:12]}", PartitionKey(PARTITION_KEY_PATH)
    )
    return CosmosStateStore(container, emulator=True)


def _table_log(connection_string: str) -> CompensationLog:
    # A table per test: the contract tests assume an empty log.
    table = TableServiceClient.from_connection_string(connection_string).create_table(
        f"{TABLE}{uuid.uuid4().hex[:10]}"
    )
    return TableCompensationLog(table)


StateStoreFactory = Callable[[Path, pytest.FixtureRequest], StateStore]

STATE_STORES: dict[str, StateStoreFactory] = {
    "sqlite": lambda tmp, request: SqliteStateStore(tmp / "state.db"),
    "cosmos": lambda tmp, request: _cosmos_store(request.getfixturevalue("cosmos_client")),
}

RECOVERY_BUCKET = timedelta(minutes=5)


def _cosmos_index(client: CosmosClient) -> RecoveryIndex:
    database = client.create_database_if_not_exists("sas")
    container = database.create_container(
        f"{cosmos_recovery_index.CONTAINER}-{uuid.uuid4().hex[:12]}",
        PartitionKey(cosmos_recovery_index.PARTITION_KEY_PATH),
    )
    return CosmosRecoveryIndex(container, RECOVERY_BUCKET, emulator=True)


RecoveryIndexFactory = Callable[[Path, pytest.FixtureRequest], RecoveryIndex]

RECOVERY_INDEXES: dict[str, RecoveryIndexFactory] = {
    "sqlite": lambda tmp, request: SqliteRecoveryIndex(tmp / "recovery_index.db", RECOVERY_BUCKET),
    "cosmos": lambda tmp, request: _cosmos_index(request.getfixturevalue("cosmos_client")),
}


def _indexed(backend: str) -> StateStoreFactory:
    """The backend's store behind the recovery index (E14): the same contract must hold."""

    def build(tmp: Path, request: pytest.FixtureRequest) -> StateStore:
        return IndexedStateStore(STATE_STORES[backend](tmp, request), RECOVERY_INDEXES[backend](tmp, request))

    return build


STATE_STORES |= {f"{backend}+index": _indexed(backend) for backend in ("sqlite", "cosmos")}


def _sqlite_odbc(tmp: Path, request: pytest.FixtureRequest) -> SqlOrdersRepository:
    import pyodbc  # noqa: PLC0415

    if "SQLite3" not in pyodbc.drivers():
        pytest.fail("the SQLite ODBC driver is not installed: run `make system-deps` (make test does)")
    return pyodbc_orders_repository(
        f"Driver={{SQLite3}};Database={tmp / 'orders-odbc.db'}", SQLITE_ODBC, SQLITE_SCHEMA
    )


def _postgres_odbc(tmp: Path, request: pytest.FixtureRequest) -> SqlOrdersRepository:
    # A database per test in the session's cluster: the contract tests assume an empty store.
    database = new_postgres_database(request.getfixturevalue("postgres_odbc"))
    return pyodbc_orders_repository(database, POSTGRESQL, POSTGRESQL_SCHEMA)


ORDERS_REPOSITORIES: dict[str, Callable[[Path, pytest.FixtureRequest], SqlOrdersRepository]] = {
    "sqlite3": lambda tmp, request: sqlite_orders_repository(tmp / "orders.db"),
    "pyodbc-sqlite": _sqlite_odbc,
    "pyodbc-postgresql": _postgres_odbc,
}
COMPENSATION_LOGS: dict[str, Callable[[Path, pytest.FixtureRequest], CompensationLog]] = {
    "sqlite": lambda tmp, request: SqliteCompensationLog(tmp / "compensation.db"),
    "tables": lambda tmp, request: _table_log(request.getfixturevalue("azurite_tables")),
}


# The backends whose server or driver make emulators / make system-deps installs: the Cosmos DB
# server, Azurite's Tables, PostgreSQL and the SQLite ODBC driver.
EMULATED = {"cosmos", "cosmos+index", "tables", "pyodbc-sqlite", "pyodbc-postgresql"}


def _close(adapter: object) -> None:
    close = getattr(adapter, "close", None)
    if close is not None:
        close()


@pytest.fixture(params=backend_params(STATE_STORES, emulated=EMULATED))
def state_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    store = STATE_STORES[request.param](tmp_path, request)
    yield store
    _close(store)


@pytest.fixture(params=backend_params(ORDERS_REPOSITORIES, emulated=EMULATED))
def orders_repository(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OrdersRepository]:
    repository = ORDERS_REPOSITORIES[request.param](tmp_path, request)
    yield repository
    _close(repository)


@pytest.fixture(params=backend_params(COMPENSATION_LOGS, emulated=EMULATED))
def compensation_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CompensationLog]:
    log = COMPENSATION_LOGS[request.param](tmp_path, request)
    yield log
    _close(log)


@pytest.fixture(params=backend_params(RECOVERY_INDEXES, emulated=EMULATED))
def recovery_index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RecoveryIndex]:
    index = RECOVERY_INDEXES[request.param](tmp_path, request)
    yield index
    _close(index)


@pytest.fixture(params=backend_params(RECOVERY_INDEXES, emulated=EMULATED))
def indexed_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[IndexedStateStore]:
    """A state store behind a recovery index, with both parts reachable for the index's own tests."""
    store = IndexedStateStore(
        STATE_STORES[request.param](tmp_path, request), RECOVERY_INDEXES[request.param](tmp_path, request)
    )
    yield store
    store.close()
