"""The fault-injecting proxy (harness/standins/fault_proxy.py): each mode against a small echo server, then
what the real clients raise through it, PostgreSQL over psqlODBC and the Cosmos SDK, as
harness/standins/FAULTS.md records. Every wait is on the proxy's counts, on an event, on a future or on a
socket's timeout."""

import re
import socket
import socketserver
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pyodbc
import pytest
from azure.core import MatchConditions
from azure.core.exceptions import (
    ServiceRequestError,
    ServiceResponseError,
    ServiceResponseTimeoutError,
)
from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey
from azure.cosmos.exceptions import CosmosClientTimeoutError
from urllib3.exceptions import NewConnectionError

from adapters.azure_profile import cosmos_container, pooled_transport
from adapters.clock import ManualClock
from harness.standins.fault_proxy import FaultProxy, Mode
from harness.standins.ports import free_port
from settings import Settings
from tests.support.clock import T0
from tests.support.emulators import EMULATOR_KEY, cosmos_server, new_postgres_database

# --- the proxy itself, against an echo server ---


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except OSError:
            pass  # the proxy reset the connection: that is what these tests do


@pytest.fixture(scope="module")
def echo() -> Iterator[tuple[str, int]]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield ("127.0.0.1", server.server_address[1])
    server.shutdown()
    server.server_close()


def _connect(proxy: FaultProxy) -> socket.socket:
    return socket.create_connection(proxy.address, timeout=5)


def _round_trip(client: socket.socket, data: bytes = b"ping") -> bytes:
    client.sendall(data)
    received = b""
    while len(received) < len(data):
        chunk = client.recv(len(data) - len(received))
        if not chunk:
            break
        received += chunk
    return received


def _silent(client: socket.socket, seconds: float = 0.2) -> bool:
    """Nothing arrives (not even an end of stream) within ``seconds``."""
    client.settimeout(seconds)
    try:
        client.recv(1)
    except TimeoutError:
        return True
    finally:
        client.settimeout(5)
    return False


def test_pass_forwards_both_ways_and_passes_a_half_close(echo: tuple[str, int]) -> None:
    with FaultProxy(echo) as proxy, _connect(proxy) as client:
        assert proxy.endpoint == f"127.0.0.1:{proxy.port}" and proxy.url() == f"https://{proxy.endpoint}"
        assert _round_trip(client) == b"ping"
        client.shutdown(socket.SHUT_WR)
        assert client.recv(10) == b""  # the server saw the end of stream and closed
        stats = proxy.stats()
        assert (stats.accepted, stats.forwarded, stats.reset, stats.held) == (1, 1, 0, 0)


def test_refuse_closes_the_listener_and_resets_open_connections(echo: tuple[str, int]) -> None:
    with FaultProxy(echo) as proxy, _connect(proxy) as client:
        assert _round_trip(client) == b"ping"
        proxy.set_mode("refuse")
        with pytest.raises(ConnectionResetError):
            client.recv(10)
        with pytest.raises(ConnectionRefusedError):
            _connect(proxy)
        proxy.set_mode("pass")  # the same port again, at once
        with _connect(proxy) as again:
            assert _round_trip(again) == b"ping"
        assert proxy.stats().reset == 1


def test_reset_resets_open_and_new_connections(echo: tuple[str, int]) -> None:
    with FaultProxy(echo) as proxy, _connect(proxy) as client:
        assert _round_trip(client) == b"ping"
        proxy.set_mode("reset")
        with pytest.raises(ConnectionResetError):
            client.recv(10)
        # The handshake is the kernel's, so connect() succeeds, unless the reset is already
        # there when it checks (a connect with a timeout reads SO_ERROR): either way, a reset.
        with pytest.raises(ConnectionResetError), _connect(proxy) as newcomer:
            proxy.wait_for(lambda stats: stats.reset == 2)
            newcomer.recv(10)
        assert proxy.stats().forwarded == 1  # the newcomer never reached the target
        proxy.set_mode("pass")
        with _connect(proxy) as again:
            assert _round_trip(again) == b"ping"


def test_stall_holds_bytes_both_ways_and_new_connections_until_pass(echo: tuple[str, int]) -> None:
    with FaultProxy(echo) as proxy, _connect(proxy) as client:
        assert _round_trip(client) == b"ping"
        proxy.set_mode("stall")
        client.sendall(b"held")
        proxy.wait_for(lambda stats: stats.held == 1)
        assert _silent(client)
        with _connect(proxy) as newcomer:  # accepted, but the target is not dialled
            newcomer.sendall(b"late")
            stats = proxy.wait_for(lambda stats: stats.waiting == 1)
            assert (stats.forwarded, stats.held, stats.held_bytes_to_target) == (1, 1, 4)
            proxy.set_mode("pass")
            assert client.recv(4) == b"held"  # held, not lost
            assert newcomer.recv(4) == b"late"
        stats = proxy.stats()
        assert (stats.forwarded, stats.waiting, stats.held, stats.held_bytes_to_target) == (2, 0, 0, 0)


def test_stall_holds_an_end_of_stream_and_reset_drops_what_it_held(echo: tuple[str, int]) -> None:
    closing = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve_then_close() -> None:
            connection, _ = listener.accept()
            closing.wait(10)
            connection.close()

        threading.Thread(target=serve_then_close, daemon=True).start()
        with FaultProxy(listener.getsockname()) as proxy, _connect(proxy) as client:
            proxy.wait_for(lambda stats: stats.forwarded == 1)
            proxy.set_mode("stall")
            closing.set()  # the target closes; a black hole does not say so
            stats = proxy.wait_for(lambda stats: stats.held == 1)
            assert stats.held_bytes_to_client == 0  # an end of stream: no bytes
            assert _silent(client)
            proxy.set_mode("pass")
            assert client.recv(10) == b""
    with FaultProxy(echo, mode="stall") as proxy, _connect(proxy) as client:
        client.sendall(b"dropped")
        proxy.wait_for(lambda stats: stats.waiting == 1)
        proxy.set_mode("reset")
        with pytest.raises(ConnectionResetError):
            client.recv(10)
        assert proxy.stats().forwarded == 0 and proxy.stats().waiting == 0


def test_a_schedule_on_a_virtual_clock_makes_an_outage_last_a_window(echo: tuple[str, int]) -> None:
    clock = ManualClock(T0)
    outage_ends = T0 + timedelta(minutes=5)
    with FaultProxy(echo) as proxy, _connect(proxy) as client:
        assert _round_trip(client) == b"ping"
        proxy.set_mode(lambda: "refuse" if clock.now() < outage_ends else "pass")
        # Under a schedule the listener stays open: a new connection is reset, not refused.
        with pytest.raises(ConnectionResetError), _connect(proxy) as newcomer:
            newcomer.recv(10)
        # An open connection is reset when it next carries bytes.
        client.sendall(b"x")
        with pytest.raises(ConnectionResetError):
            client.recv(10)
        clock.advance(timedelta(minutes=5))
        with _connect(proxy) as again:
            assert _round_trip(again) == b"ping"
            # A stall under a schedule ends when the clock says so (the proxy polls it).
            stall_ends = clock.now() + timedelta(seconds=30)
            proxy.set_mode(lambda: "stall" if clock.now() < stall_ends else "pass")
            again.sendall(b"held")
            proxy.wait_for(lambda stats: stats.held == 1)
            assert _silent(again)
            clock.advance(timedelta(seconds=30))
            assert again.recv(4) == b"held"
        assert proxy.errors == []


def test_a_schedule_that_fails_is_reported_and_the_connection_reset(echo: tuple[str, int]) -> None:
    with FaultProxy(echo, mode=lambda: "sideways") as proxy:  # type: ignore[arg-type, return-value]
        with pytest.raises(ConnectionResetError), _connect(proxy) as client:
            client.recv(10)
        proxy.wait_for(lambda stats: stats.active == 0)
        assert [str(error) for error in proxy.errors] == [
            "the schedule returned 'sideways': one of pass, refuse, reset, stall"
        ]
        with pytest.raises(ValueError, match="unknown mode 'sideways'"):
            proxy.set_mode("sideways")  # type: ignore[arg-type]


def test_a_target_that_refuses_gets_the_client_reset() -> None:
    with FaultProxy(("127.0.0.1", free_port())) as proxy:
        with pytest.raises(ConnectionResetError), _connect(proxy) as client:
            client.recv(10)
        assert proxy.stats().forwarded == 0


def test_close_stops_listening_and_may_be_repeated(echo: tuple[str, int]) -> None:
    proxy = FaultProxy(echo)
    client = _connect(proxy)
    assert _round_trip(client) == b"ping"
    proxy.close()
    assert client.recv(10) == b""  # closed with a FIN
    client.close()
    with pytest.raises(ConnectionRefusedError):
        _connect(proxy)
    proxy.close()


# --- PostgreSQL over psqlODBC, through the proxy ---


@pytest.fixture
def postgres(postgres_odbc: str) -> Iterator[tuple[FaultProxy, str]]:
    """A proxy in front of a fresh database; yields it and a connection string through it."""
    database = new_postgres_database(postgres_odbc)
    port = re.search(r"Port=(\d+)", database)
    assert port is not None
    with FaultProxy(("127.0.0.1", int(port[1]))) as proxy:
        yield proxy, database.replace(f"Port={port[1]}", f"Port={proxy.port}")


def _odbc_error(call: Callable[[], Any]) -> tuple[pyodbc.Error, float]:
    started = time.monotonic()
    with pytest.raises(pyodbc.Error) as raised:
        call()
    return raised.value, time.monotonic() - started


@pytest.mark.emulators  # PostgreSQL
def test_postgres_refused_at_connect(postgres: tuple[FaultProxy, str]) -> None:
    proxy, connection_string = postgres
    proxy.set_mode("refuse")
    error, _ = _odbc_error(lambda: pyodbc.connect(connection_string))
    assert type(error) is pyodbc.OperationalError and error.args[0] == "08001"
    assert "failed: Connection refused" in error.args[1]


@pytest.mark.emulators  # PostgreSQL
def test_postgres_reset_at_connect(postgres: tuple[FaultProxy, str]) -> None:
    proxy, connection_string = postgres
    proxy.set_mode("reset")
    error, _ = _odbc_error(lambda: pyodbc.connect(connection_string))
    assert type(error) is pyodbc.OperationalError and error.args[0] == "08001"
    # Which message is a race: the reset seen by connect() itself (libpq reads SO_ERROR) or by
    # the first read of the start-up exchange.
    assert re.search(
        r"failed: (Connection reset by peer|server closed the connection unexpectedly)", error.args[1]
    )


@pytest.mark.emulators  # PostgreSQL
@pytest.mark.parametrize("mode", ["reset", "refuse"])
def test_postgres_open_connection_reset(postgres: tuple[FaultProxy, str], mode: Mode) -> None:
    proxy, connection_string = postgres
    connection = pyodbc.connect(connection_string)
    assert connection.execute("SELECT 1").fetchone()[0] == 1
    proxy.set_mode(mode)
    error, elapsed = _odbc_error(lambda: connection.execute("SELECT 1"))
    assert type(error) is pyodbc.OperationalError and error.args[0] == "08S01"
    assert "server closed the connection unexpectedly" in error.args[1]
    assert "The connection has been lost" in error.args[1] and elapsed < 5
    proxy.set_mode("pass")  # the connection stays dead: a new one is needed
    error, _ = _odbc_error(lambda: connection.execute("SELECT 1"))
    assert type(error) is pyodbc.OperationalError and error.args[0] == "08S01"
    assert "unable due to the connection lost" in error.args[1]
    assert pyodbc.connect(connection_string).execute("SELECT 1").fetchone()[0] == 1


@pytest.mark.emulators  # PostgreSQL
def test_postgres_reset_before_commit(postgres: tuple[FaultProxy, str]) -> None:
    proxy, connection_string = postgres
    connection = pyodbc.connect(connection_string)
    connection.execute("CREATE TABLE t (x int)")
    connection.commit()
    connection.execute("INSERT INTO t VALUES (1)")
    proxy.set_mode("reset")
    error, _ = _odbc_error(connection.commit)
    assert type(error) is pyodbc.OperationalError and error.args[0] == "08S01"
    assert "server closed the connection unexpectedly" in error.args[1] and "(SQLEndTran)" in error.args[1]


@pytest.mark.emulators  # PostgreSQL
def test_postgres_stall_at_connect_is_bounded_by_the_login_timeout(postgres: tuple[FaultProxy, str]) -> None:
    proxy, connection_string = postgres
    proxy.set_mode("stall")
    attempts = {
        # pyodbc's timeout= is SQL_ATTR_LOGIN_TIMEOUT, which psqlODBC passes to libpq's
        # connect_timeout, and libpq waits at least 2 s.
        "timeout=2": (lambda: pyodbc.connect(connection_string, timeout=2)),
        "timeout=1": (lambda: pyodbc.connect(connection_string, timeout=1)),
        "pqopt": (lambda: pyodbc.connect(connection_string + ";pqopt={connect_timeout=2}")),
    }
    with ThreadPoolExecutor(len(attempts)) as pool:  # side by side: 2 s in all
        outcomes = {name: pool.submit(_odbc_error, attempt) for name, attempt in attempts.items()}
        for name, outcome in outcomes.items():
            error, elapsed = outcome.result(timeout=10)
            assert type(error) is pyodbc.OperationalError and error.args[0] == "08001", name
            assert "failed: timeout expired" in error.args[1], name
            assert 2 <= elapsed < 8, name  # bounded by the login timeout, loosely for a loaded machine


@pytest.mark.emulators  # PostgreSQL
def test_postgres_stall_mid_query_is_not_bounded_by_the_driver(postgres: tuple[FaultProxy, str]) -> None:
    proxy, connection_string = postgres
    connection = pyodbc.connect(connection_string)
    # pyodbc's query timeout is SQL_ATTR_CONNECTION_TIMEOUT, which psqlODBC refuses (and its
    # statement-level timeout is a server-side statement_timeout, no help when the network stalls).
    with pytest.raises(pyodbc.Error) as refused:
        connection.timeout = 2
    assert refused.value.args[0] == "HY000" and "unsupported connect attribute 113" in refused.value.args[1]
    proxy.set_mode("stall")
    with ThreadPoolExecutor(1) as pool:
        query: Future[Any] = pool.submit(lambda: connection.execute("SELECT 2").fetchone()[0])
        proxy.wait_for(lambda stats: stats.held_bytes_to_target > 0)
        with pytest.raises(TimeoutError):
            query.result(timeout=1)  # still waiting: nothing in psqlODBC ends it
        proxy.set_mode("pass")  # the partition heals: the held query goes through
        assert query.result(timeout=5) == 2
        proxy.set_mode("stall")
        query = pool.submit(lambda: connection.execute("SELECT 3").fetchone()[0])
        proxy.wait_for(lambda stats: stats.held_bytes_to_target > 0)
        proxy.set_mode("reset")
        with pytest.raises(pyodbc.OperationalError) as reset:
            query.result(timeout=5)
        assert (
            reset.value.args[0] == "08S01"
            and "server closed the connection unexpectedly" in reset.value.args[1]
        )


# --- the Cosmos SDK, through the proxy ---

CONTAINER = "faults"


def _client(connection: str, **options: Any) -> CosmosClient:
    return CosmosClient.from_connection_string(
        connection, connection_verify=False, transport=pooled_transport(), **options
    )


@pytest.fixture(scope="module")
def cosmos_proxy() -> Iterator[tuple[FaultProxy, str]]:
    """A Cosmos DB API server whose account advertises the proxy in front of it; yields the proxy
    and a connection string through it, with the container ``faults`` created."""
    server_port = free_port()
    with FaultProxy(("127.0.0.1", server_port)) as proxy, cosmos_server(server_port, proxy.port):
        connection = f"AccountEndpoint={proxy.url()}/;AccountKey={EMULATOR_KEY};"
        _client(connection).create_database_if_not_exists("sas").create_container_if_not_exists(
            CONTAINER, PartitionKey("/pk")
        )
        yield proxy, connection


@pytest.fixture
def cosmos(cosmos_proxy: tuple[FaultProxy, str]) -> Iterator[tuple[FaultProxy, str]]:
    proxy, connection = cosmos_proxy
    yield proxy, connection
    proxy.set_mode("reset")  # what a test stalled goes, and the next test starts afresh
    proxy.set_mode("pass")


def _container(connection: str, **options: Any) -> ContainerProxy:
    """The container as the app builds it (adapters.azure_profile.cosmos_container), after one read
    so the SDK has its account, container and a pooled connection."""
    settings = Settings(profile="emulators", cosmos_connection=connection)
    container, _ = cosmos_container(settings, CONTAINER, **options)
    container.read()
    return container


# Each attempt bounded to half a second, and one retry where the SDK retries.
BOUNDED = {"connection_timeout": 0.5, "read_timeout": 0.5, "retry_connect": 1, "retry_read": 1}


def _item(container: ContainerProxy) -> tuple[str, str]:
    """A new item's id and etag."""
    item = container.create_item({"id": uuid.uuid4().hex, "pk": "p", "n": 0})
    return item["id"], item["_etag"]


def _operations(container: ContainerProxy) -> dict[str, Callable[[], Any]]:
    """read_item, create_item and replace_item (if not modified) on a new item."""
    item_id, etag = _item(container)
    return {
        "read_item": lambda: container.read_item(item_id, "p"),
        "create_item": lambda: container.create_item({"id": uuid.uuid4().hex, "pk": "p"}),
        "replace_item": lambda: container.replace_item(
            item_id,
            {"id": item_id, "pk": "p", "n": 1},
            etag=etag,
            match_condition=MatchConditions.IfNotModified,
        ),
    }


def _raises[E: BaseException](
    kind: type[E] | tuple[type[E], ...], call: Callable[[], Any]
) -> tuple[E, float]:
    started = time.monotonic()
    with pytest.raises(kind) as raised:
        call()
    return raised.value, time.monotonic() - started


@pytest.mark.emulators  # the Cosmos DB server
def test_cosmos_sdk_bypasses_a_proxy_its_account_does_not_advertise(cosmos: tuple[FaultProxy, str]) -> None:
    advertised, _ = cosmos
    with FaultProxy(advertised.target) as other:  # a second way in, which the account does not name
        container = _container(f"AccountEndpoint={other.url()}/;AccountKey={EMULATOR_KEY};")
        item_id, _ = _item(container)
        other.set_mode("refuse")
        # After the account read, every request goes where the account says: the first proxy.
        assert container.read_item(item_id, "p")["id"] == item_id
        assert other.stats().accepted >= 1 and advertised.stats().forwarded >= 1


@pytest.mark.emulators  # the Cosmos DB server
def test_cosmos_refused_is_retried_by_the_sdk_then_raised(cosmos: tuple[FaultProxy, str]) -> None:
    proxy, connection = cosmos
    app = _operations(_container(connection))  # the app's options: one connect retry
    sdk_defaults = _operations(_container(connection, retry_connect=3))
    unretried = _operations(_container(connection, retry_connect=0))
    proxy.set_mode("refuse")
    # The SDK's default: four attempts, 0, 1 and 1 s apart (writes too: nothing was sent).
    error, elapsed = _raises(ServiceRequestError, sdk_defaults["read_item"])
    assert type(error) is ServiceRequestError and isinstance(error.inner_exception, NewConnectionError)
    assert "[Errno 111] Connection refused" in str(error)
    assert elapsed > 1.9
    # Upper bounds below only tell "at once" from "after the SDK's waits"; they are loose for a
    # loaded machine. The app leaves longer waits to its own policy (adapters/resilience.py).
    for name, operation in (*app.items(), *unretried.items()):
        error, elapsed = _raises(ServiceRequestError, operation)
        assert type(error) is ServiceRequestError and "[Errno 111] Connection refused" in str(error), name
        assert elapsed < 1.5, name


@pytest.mark.emulators  # the Cosmos DB server
def test_cosmos_reset_once_is_transparent(cosmos: tuple[FaultProxy, str]) -> None:
    proxy, connection = cosmos
    for operation in _operations(_container(connection)).values():
        proxy.set_mode("reset")
        proxy.set_mode("pass")
        operation()  # the pooled connection is seen dropped and replaced


@pytest.mark.emulators  # the Cosmos DB server
def test_cosmos_connections_reset(cosmos: tuple[FaultProxy, str]) -> None:
    proxy, connection = cosmos
    operations = _operations(_container(connection, retry_total=0))
    proxy.set_mode("reset")
    for name, operation in operations.items():
        # A reset during connect() is a ServiceRequestError (NewConnectionError); during the TLS
        # handshake, a ServiceResponseError ("Connection aborted."): which one is a race.
        error, _ = _raises((ServiceRequestError, ServiceResponseError), operation)
        assert type(error) in (ServiceRequestError, ServiceResponseError), name
        assert "Connection reset by peer" in str(error), name


@pytest.mark.emulators  # the Cosmos DB server
def test_cosmos_reset_mid_request_fails_a_write_but_not_a_read(cosmos: tuple[FaultProxy, str]) -> None:
    proxy, connection = cosmos
    # The SDK's default read retries: its first retry may still meet the reset (it does not wait),
    # at its new connection, which the app's client does not retry (its budget does): here the SDK
    # retries both, so the test is of the SDK's rule alone (a read again, a write never).
    container = _container(connection, retry_read=3, retry_connect=3)
    operations = _operations(container)
    item = operations["read_item"]()
    with ThreadPoolExecutor(1) as pool:
        for name, operation in operations.items():
            proxy.set_mode("pass")
            container.read()  # a live pooled connection, for the request to be held on
            proxy.set_mode("stall")
            outcome = pool.submit(operation)
            proxy.wait_for(lambda stats: stats.held_bytes_to_target > 0)  # the request is under way
            proxy.set_mode("reset")
            proxy.set_mode("pass")
            if name == "read_item":
                outcome.result(timeout=10)  # retried by the SDK (retry_read)
                continue
            # A write that may have been sent is not retried: its outcome is unknown to the caller.
            error = outcome.exception(timeout=10)
            assert type(error) is ServiceResponseError and "Connection aborted." in str(error), name
    assert container.read_item(item["id"], "p")["n"] == 0  # the replace never reached the server


@pytest.mark.emulators  # the Cosmos DB server
def test_cosmos_stall_at_connect(cosmos: tuple[FaultProxy, str]) -> None:
    proxy, connection = cosmos
    operations = _operations(_container(connection, **BOUNDED))
    # replace_item (if not modified) fails as create_item does (harness/standins/FAULTS.md).
    for name, attempts in (("read_item", 2), ("create_item", 1)):
        proxy.set_mode("reset")  # no pooled connection: the next request dials a new one
        proxy.set_mode("stall")
        # The TLS handshake is held. urllib3 reports it as a read timeout carrying the connect
        # timeout, so the SDK retries it for reads only, although nothing was sent.
        error, elapsed = _raises(ServiceResponseTimeoutError, operations[name])
        assert "Read timed out. (read timeout=0.5)" in str(error), name
        assert attempts * 0.5 <= elapsed < attempts * 0.5 + 5, name


@pytest.mark.emulators  # the Cosmos DB server
def test_cosmos_stall_mid_request(cosmos: tuple[FaultProxy, str]) -> None:
    proxy, connection = cosmos
    operations = _operations(_container(connection, **BOUNDED))
    # replace_item (if not modified) fails as create_item does (harness/standins/FAULTS.md).
    for name, attempts in (("read_item", 2), ("create_item", 1)):
        proxy.set_mode("pass")
        operations["read_item"]()  # a live pooled connection
        proxy.set_mode("stall")
        error, elapsed = _raises(ServiceResponseTimeoutError, operations[name])
        assert "Read timed out. (read timeout=0.5)" in str(error), name
        assert attempts * 0.5 <= elapsed < attempts * 0.5 + 5, name


@pytest.mark.emulators  # the Cosmos DB server
def test_cosmos_per_call_timeout_does_not_bound_a_stalled_response(cosmos: tuple[FaultProxy, str]) -> None:
    proxy, connection = cosmos
    # One SDK retry (the app turns them off), so that there is a "between attempts" to check.
    container = _container(connection, read_timeout=1, retry_read=1)
    item_id, _ = _item(container)
    proxy.set_mode("stall")
    # ``timeout`` caps each attempt's connect timeout and is checked between attempts; the wait
    # for a response is read_timeout's.
    error, elapsed = _raises(CosmosClientTimeoutError, lambda: container.read_item(item_id, "p", timeout=0.2))
    assert isinstance(error.inner_exception, ServiceResponseTimeoutError)
    assert 1 <= elapsed < 10  # read_timeout's 1 s, not the 0.2 s timeout (nor the default 65 s)
