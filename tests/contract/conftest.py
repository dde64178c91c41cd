"""Adapters under contract. Each port's suite runs over every adapter listed here.

Adding a backend (Cosmos, pyodbc, Table Storage) means adding one factory to the list; the
assertions stay the same.
"""

import socket
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import urllib3
from azure.cosmos import CosmosClient, PartitionKey
from azure.data.tables import TableServiceClient

from adapters.cosmos_state_store import CONTAINER, PARTITION_KEY_PATH, CosmosStateStore
from adapters.sql_orders import (
    SQLITE_ODBC,
    SQLITE_SCHEMA,
    SqlOrdersRepository,
    pyodbc_orders_repository,
    sqlite_orders_repository,
)
from adapters.sqlite_compensation_log import SqliteCompensationLog
from adapters.sqlite_state_store import SqliteStateStore
from adapters.table_compensation_log import TABLE, TableCompensationLog
from domain.ports import CompensationLog, OrdersRepository, StateStore

ROOT = Path(__file__).resolve().parents[2]
COSMOS_CLI = ROOT / "emulators" / "node_modules" / "@vercel" / "cosmosdb-server" / "lib" / "cli.js"
# The emulator's well-known key: it guards nothing (loopback, test data only).
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def cosmos_client() -> Iterator[CosmosClient]:
    """A Cosmos DB API server (@vercel/cosmosdb-server) on loopback, for this test session."""
    if not COSMOS_CLI.exists():
        pytest.fail("the Cosmos emulator is not installed: run `make emulators` (make test does)")
    port = _free_port()
    server = subprocess.Popen(
        ["node", str(COSMOS_CLI), "-p", str(port), "--host", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert server.stdout is not None
    ready = server.stdout.readline()  # "Ready to accept HTTPS connections at ..."
    if "Ready" not in ready:
        server.kill()
        pytest.fail(f"the Cosmos emulator did not start: {ready}")
    threading.Thread(target=server.stdout.read, daemon=True).start()  # keep its pipe drained
    urllib3.disable_warnings()  # its certificate is self-signed, on loopback
    client = CosmosClient(f"https://127.0.0.1:{port}", credential=EMULATOR_KEY, connection_verify=False)
    yield client
    server.terminate()
    server.wait(timeout=10)


def _cosmos_store(client: CosmosClient) -> StateStore:
    database = client.create_database_if_not_exists("sas")
    # A container per test: the contract tests assume an empty store.
    container = database.create_container(
        f"{CONTAINER}-{uuid.uuid4().hex[:12]}", PartitionKey(PARTITION_KEY_PATH)
    )
    return CosmosStateStore(container, emulator=True)


AZURITE = ROOT / "emulators" / "node_modules" / "azurite" / "dist" / "src" / "azurite.js"
# Azurite's well-known development account: loopback, test data only.
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture(scope="session")
def azurite_tables(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Azurite (Blobs, Queues, Tables) on loopback; yields a Tables connection string."""
    if not AZURITE.exists():
        pytest.fail("Azurite is not installed: run `make emulators` (make test does)")
    ports = [_free_port() for _ in range(3)]
    workdir = tmp_path_factory.mktemp("azurite")
    server = subprocess.Popen(
        [
            "node",
            str(AZURITE),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--loose",
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(ports[0]),
            "--queueHost",
            "127.0.0.1",
            "--queuePort",
            str(ports[1]),
            "--tableHost",
            "127.0.0.1",
            "--tablePort",
            str(ports[2]),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=workdir,  # anything it writes stays out of the repo
    )
    assert server.stdout is not None
    lines = []
    while not any("Table service is successfully listening" in line for line in lines):
        line = server.stdout.readline()
        if not line:
            server.kill()
            pytest.fail(f"Azurite did not start: {''.join(lines)}")
        lines.append(line)
    threading.Thread(target=server.stdout.read, daemon=True).start()
    yield (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={AZURITE_KEY};TableEndpoint=http://127.0.0.1:{ports[2]}/devstoreaccount1;"
    )
    server.terminate()
    server.wait(timeout=10)


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


def _sqlite_odbc(tmp: Path) -> SqlOrdersRepository:
    import pyodbc  # noqa: PLC0415

    if "SQLite3" not in pyodbc.drivers():
        pytest.fail("the SQLite ODBC driver is not installed: run `make system-deps` (make test does)")
    return pyodbc_orders_repository(
        f"Driver={{SQLite3}};Database={tmp / 'orders-odbc.db'}", SQLITE_ODBC, SQLITE_SCHEMA
    )


ORDERS_REPOSITORIES: dict[str, Callable[[Path], SqlOrdersRepository]] = {
    "sqlite3": lambda tmp: sqlite_orders_repository(tmp / "orders.db"),
    "pyodbc-sqlite": _sqlite_odbc,
}
COMPENSATION_LOGS: dict[str, Callable[[Path, pytest.FixtureRequest], CompensationLog]] = {
    "sqlite": lambda tmp, request: SqliteCompensationLog(tmp / "compensation.db"),
    "tables": lambda tmp, request: _table_log(request.getfixturevalue("azurite_tables")),
}


def _close(adapter: object) -> None:
    close = getattr(adapter, "close", None)
    if close is not None:
        close()


@pytest.fixture(params=sorted(STATE_STORES))
def state_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    store = STATE_STORES[request.param](tmp_path, request)
    yield store
    _close(store)


@pytest.fixture(params=sorted(ORDERS_REPOSITORIES))
def orders_repository(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OrdersRepository]:
    repository = ORDERS_REPOSITORIES[request.param](tmp_path)
    yield repository
    _close(repository)


@pytest.fixture(params=sorted(COMPENSATION_LOGS))
def compensation_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CompensationLog]:
    log = COMPENSATION_LOGS[request.param](tmp_path, request)
    yield log
    _close(log)
