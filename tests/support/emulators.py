"""Local servers for the emulators profile: the Cosmos DB API server and Azurite, both installed
by ``make emulators``, and a PostgreSQL cluster reached over ODBC (``make system-deps``). The
fixtures in tests/conftest.py start each once per test session (per xdist worker)."""

import contextlib
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from harness.standins.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
COSMOS_PACKAGE = ROOT / "harness" / "emulators" / "node_modules" / "@vercel" / "cosmosdb-server"
# Its CLI with keep-alive on, as Cosmos DB has it (harness/emulators/cosmos-server.js says why).
COSMOS_SERVER = ROOT / "harness" / "emulators" / "cosmos-server.js"
# The emulator's well-known key: it guards nothing (loopback, test data only).
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


@contextlib.contextmanager
def cosmos_server(port: int, advertised_port: int | None = None) -> Iterator[str]:
    """A Cosmos DB API server (@vercel/cosmosdb-server) on ``127.0.0.1:<port>``, stopped on exit;
    yields its endpoint. With ``advertised_port`` its account document names that port as the
    account's endpoint, which the SDK then sends every request to: a test puts a proxy there
    (harness/standins/fault_proxy.py; harness/emulators/cosmos-server.js says why)."""
    if not COSMOS_PACKAGE.exists():
        pytest.fail("the Cosmos emulator is not installed: run `make emulators` (make test does)")
    advertised = [str(advertised_port)] if advertised_port is not None else []
    server = subprocess.Popen(
        ["node", str(COSMOS_SERVER), str(port), "127.0.0.1", *advertised],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        ready = server.stdout.readline()  # "Ready to accept HTTPS connections at ..."
        if "Ready" not in ready:
            pytest.fail(f"the Cosmos emulator did not start: {ready}")
        threading.Thread(target=server.stdout.read, daemon=True).start()  # keep its pipe drained
        urllib3.disable_warnings()  # its certificate is self-signed, on loopback
        yield f"https://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


AZURITE = ROOT / "harness" / "emulators" / "node_modules" / "azurite" / "dist" / "src" / "azurite.js"
# Azurite's well-known development account: loopback, test data only.
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@contextlib.contextmanager
def azurite_server(workdir: Path) -> Iterator[list[int]]:
    """Azurite (Blobs, Queues, Tables) on loopback, stopped on exit; yields its blob, queue and
    table ports. Anything it writes goes to ``workdir``."""
    if not AZURITE.exists():
        pytest.fail("Azurite is not installed: run `make emulators` (make test does)")
    ports = [free_port() for _ in range(3)]
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
    lines: list[str] = []
    while not any("Table service is successfully listening" in line for line in lines):
        line = server.stdout.readline()
        if not line:
            server.kill()
            pytest.fail(f"Azurite did not start: {''.join(lines)}")
        lines.append(line)
    threading.Thread(target=server.stdout.read, daemon=True).start()
    try:
        yield ports
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:  # busy with a client's open connections: it holds test data only
            server.kill()
            server.wait(timeout=10)


# PostgreSQL over ODBC (psqlODBC): the orders repository's third engine. The server binaries
# come from Debian's `postgresql` package, the driver from `odbc-postgresql` (make system-deps).
POSTGRES_LIB = Path("/usr/lib/postgresql")
POSTGRES_ODBC_DRIVER = "PostgreSQL Unicode"
# Trust authentication: the server listens on loopback only and holds throwaway test data.
INITDB_OPTIONS = ("--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
# Test data only: no durability, and little memory, since other test processes share the machine.
POSTGRES_SETTINGS = (
    "listen_addresses=127.0.0.1",
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "shared_buffers=32MB",
    "max_connections=50",
)


def _postgres_bin() -> Path:
    """The newest installed server's bin directory: Debian installs each major version in
    /usr/lib/postgresql/<major>/bin, not on PATH."""
    versions = [
        path
        for path in POSTGRES_LIB.glob("*")
        if path.name.isdigit() and (path / "bin" / "postgres").exists()
    ]
    if not versions:
        pytest.fail(
            f"the PostgreSQL server is not installed (no {POSTGRES_LIB}/<version>/bin/postgres): "
            "run `make system-deps` (make test does)"
        )
    return max(versions, key=lambda path: int(path.name)) / "bin"


def _as_postgres_user() -> dict[str, Any]:
    """Popen arguments that drop root: initdb and postgres refuse to run as root (CI is root)."""
    if os.geteuid() != 0:
        return {}
    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


@contextlib.contextmanager
def postgres_cluster() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on loopback, removed on exit; yields a pyodbc connection
    string to its ``postgres`` database as superuser ``postgres`` (trust authentication, loopback
    only). ``new_postgres_database`` gives each test its own."""
    import pyodbc  # noqa: PLC0415 - only the SQL tests need the driver manager

    if POSTGRES_ODBC_DRIVER not in pyodbc.drivers():
        pytest.fail(
            f"the {POSTGRES_ODBC_DRIVER} ODBC driver is not installed (Debian: odbc-postgresql): "
            "run `make system-deps` (make test does)"
        )
    bin_dir = _postgres_bin()
    as_user = _as_postgres_user()
    # Not under pytest's basetemp: that is private to root (0700), and the server runs as nobody.
    workdir = Path(tempfile.mkdtemp(prefix="sas-postgres-"))
    if as_user:
        os.chown(workdir, as_user["user"], as_user["group"])
    server: subprocess.Popen[bytes] | None = None
    try:
        initdb = subprocess.run(
            [str(bin_dir / "initdb"), "-D", str(workdir / "data"), "-U", "postgres", *INITDB_OPTIONS],
            capture_output=True,
            text=True,
            cwd=workdir,
            check=False,
            **as_user,
        )
        if initdb.returncode != 0:
            pytest.fail(f"initdb failed: {initdb.stderr or initdb.stdout}")
        # Another worker may take the free port before the server binds it: try a few.
        for _attempt in range(3):
            server, connection_string = _start_postgres(bin_dir, workdir, as_user)
            if server.poll() is None:
                break
        else:
            pytest.fail(f"PostgreSQL did not start: {_postgres_log(workdir)}")
        yield connection_string
    finally:
        if server is not None and server.poll() is None:
            # SIGINT is PostgreSQL's fast shutdown: it ends open sessions instead of waiting for them.
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


def _start_postgres(
    bin_dir: Path, workdir: Path, as_user: dict[str, Any]
) -> tuple[subprocess.Popen[bytes], str]:
    """Starts the server and waits until it answers over ODBC; a server that exited is returned
    as is (its log says why) so the caller can retry on another port."""
    import pyodbc  # noqa: PLC0415

    port = free_port()
    with (workdir / "postgres.log").open("ab") as log:
        server = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(workdir / "data"), "-k", str(workdir), "-p", str(port)]
            + [option for setting in POSTGRES_SETTINGS for option in ("-c", setting)],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            **as_user,
        )
    connection_string = (
        f"Driver={{{POSTGRES_ODBC_DRIVER}}};Server=127.0.0.1;Port={port};Uid=postgres;Pwd=;Database=postgres"
    )
    # Until it answers, or has exited (then its log says why; the caller retries on another port).
    answering = Retrying(
        stop=stop_after_delay(30), wait=wait_fixed(0.1), retry=retry_if_exception_type(pyodbc.Error)
    )
    try:
        for attempt in answering:
            with attempt:
                if server.poll() is not None:
                    break
                pyodbc.connect(connection_string, timeout=2).close()
    except RetryError:
        server.kill()
        server.wait(timeout=10)
        pytest.fail(f"PostgreSQL did not answer in 30 s: {_postgres_log(workdir)}")
    return server, connection_string


def _postgres_log(workdir: Path) -> str:
    return (workdir / "postgres.log").read_text(errors="replace")[-2000:]


def new_postgres_database(connection_string: str) -> str:
    """Creates an empty database in the ``postgres_odbc`` cluster and returns a connection string
    to it: tests that assume an empty store each get their own (CREATE DATABASE takes ~30 ms)."""
    import pyodbc  # noqa: PLC0415

    name = f"t{uuid.uuid4().hex[:16]}"
    # CREATE DATABASE cannot run inside a transaction.
    admin = pyodbc.connect(connection_string, autocommit=True)
    try:
        admin.execute(f"CREATE DATABASE {name}")
    finally:
        admin.close()
    return re.sub(r"Database=[^;]*$", f"Database={name}", connection_string)


def empty_compensation_log(tables_connection: str) -> None:
    """The compensation log's table, created and emptied. One Azurite serves every test an xdist
    worker runs in turn, all with the adapter's one table name, so an entry another test left
    under a reused OrderID (o-007) would read as a step of this test's order to undo."""
    from azure.data.tables import TableServiceClient  # noqa: PLC0415 - only the emulator tests

    from adapters.storage.compensation_log import TABLE  # noqa: PLC0415

    table = TableServiceClient.from_connection_string(tables_connection).create_table_if_not_exists(TABLE)
    for entity in table.list_entities(select=["PartitionKey", "RowKey"]):
        table.delete_entity(entity["PartitionKey"], entity["RowKey"])
