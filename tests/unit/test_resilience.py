"""The transient-fault policy: which errors are retried, for how long, and what callers see."""

import re
import sqlite3
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyodbc
import pytest
from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError
from azure.cosmos.exceptions import CosmosHttpResponseError
from azure.servicebus.exceptions import (
    MessageSizeExceededError,
    ServiceBusConnectionError,
    ServiceBusServerBusyError,
)

from adapters.clock import ManualClock
from adapters.resilience import RetryPolicy, guard, is_transient
from adapters.sql.pool import ConnectionPool
from domain.errors import DependencyUnavailable, PreconditionFailed
from domain.policy import Postponement
from services.outages import OutageMonitor
from settings import Settings
from tests.support.clock import T0


def http_error(status: int) -> HttpResponseError:
    error = HttpResponseError(message=f"status {status}")
    error.status_code = status
    return error


@pytest.mark.parametrize(
    "error",
    [
        sqlite3.OperationalError("database is locked"),
        pyodbc.OperationalError("08001", "[unixODBC]could not connect to server: Connection refused"),
        pyodbc.Error("08S01", "[PostgreSQL]server closed the connection unexpectedly"),
        pyodbc.OperationalError("HYT00", "[Microsoft][ODBC Driver 18 for SQL Server]Login timeout expired"),
        pyodbc.Error(
            "42000",
            "[Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Database 'orders' on server 'sql' is not "
            "currently available. Please retry the connection later. (40613) (SQLDriverConnect)",
        ),
        pyodbc.Error("40001", "[SQL Server]Transaction was deadlocked (1205)"),
        pyodbc.Error("57P01", "terminating connection due to administrator command"),
        ServiceRequestError("Connection refused"),
        ServiceResponseError("Connection reset by peer"),
        http_error(408),
        http_error(429),
        http_error(449),
        http_error(503),
        CosmosHttpResponseError(status_code=503, message="Service Unavailable"),
        ServiceBusConnectionError(message="link detached"),
        ServiceBusServerBusyError(message="server busy"),
        ConnectionResetError("reset"),
        TimeoutError("timed out"),
        DependencyUnavailable("orders database", "down"),
    ],
    ids=repr,
)
def test_faults_that_may_clear_are_transient(error: BaseException) -> None:
    assert is_transient(error)


@pytest.mark.parametrize(
    "error",
    [
        sqlite3.IntegrityError("UNIQUE constraint failed: Orders.OrderID"),
        sqlite3.OperationalError("no such table: Orders"),
        pyodbc.IntegrityError("23505", "duplicate key value violates unique constraint"),
        pyodbc.Error("23000", "[SQL Server]Violation of PRIMARY KEY constraint (2627)"),
        pyodbc.ProgrammingError("42S02", "[SQL Server]Invalid object name 'Orders'. (208)"),
        http_error(400),
        http_error(404),
        http_error(409),
        http_error(412),
        CosmosHttpResponseError(status_code=412, message="Precondition Failed"),
        MessageSizeExceededError(message="too big"),
        PreconditionFailed("etag"),
        ValueError("a bug"),
    ],
    ids=repr,
)
def test_faults_that_would_repeat_are_not(error: BaseException) -> None:
    assert not is_transient(error)


# What the two ODBC drivers the app supports say when the connection is lost, which they may report
# under HY000, a general error (adapters/resilience.py cites where each text comes from). The first
# is what a reset in the middle of any orders statement raises (tests/faults/test_odbc_connection_loss.py).
PSQLODBC_LOST = [
    "The connection has been lost;\nError while preparing parameters (1) (SQLExecDirectW)",
    "FATAL: terminating connection due to administrator command;\nThe connection has been lost (35)"
    " (SQLExecDirectW)",
    "SQLExecDirectW unable due to the connection lost (35) (SQLExecDirectW)",
    "The connection is down\nFailed to send 'COMMIT' (104) (SQLEndTran)",
    "communication error occured (113) (SQLExecDirectW)",  # psqlODBC before 17.00
    "communication error occurred (113) (SQLExecDirectW)",
    "Could not receive the response, communication down ?? (34) (SQLExecDirectW)",
]
ODBC18_LOST = [
    "[Microsoft][ODBC Driver 18 for SQL Server]Communication link failure (0) (SQLExecDirectW)",
    "[Microsoft][ODBC Driver 18 for SQL Server]TCP Provider: Error code 0x68 (104) (SQLExecDirectW)",
    "[Microsoft][ODBC Driver 18 for SQL Server]TCP Provider: Error code 0x20 (32) (SQLEndTran)",
]


@pytest.mark.parametrize("message", PSQLODBC_LOST + ODBC18_LOST)
def test_the_odbc_drivers_connection_loss_texts_are_transient_even_under_a_general_error(
    message: str,
) -> None:
    assert is_transient(pyodbc.Error("HY000", f"[HY000] {message}"))


@pytest.mark.parametrize("sqlstate", ["IMC01", "IMC02", "IMC03", "IMC04", "IMC05", "IMC06"])
def test_odbc_driver_18_giving_up_restoring_a_broken_connection_is_transient(sqlstate: str) -> None:
    message = (
        f"[{sqlstate}] [Microsoft][ODBC Driver 18 for SQL Server]The connection is broken and recovery is"
        " not possible. (0) (SQLExecDirectW)"
    )
    assert is_transient(pyodbc.Error(sqlstate, message))


# Near misses: errors of the statement, the data or the login, from the same drivers, some under a
# connection SQLSTATE or with a number in brackets that is an Azure SQL transient error's.
@pytest.mark.parametrize(
    "error",
    [
        pyodbc.ProgrammingError(
            "42601",
            '[42601] ERROR: syntax error at or near "SELEC";\nError while executing the query (1)'
            " (SQLExecDirectW)",
        ),
        pyodbc.IntegrityError(
            "23505",
            '[23505] ERROR: duplicate key value violates unique constraint "orders_pkey"\nDETAIL: Key'
            " (orderid)=(o-1) already exists.;\nError while executing the query (1) (SQLExecDirectW)",
        ),
        pyodbc.DataError(
            "22001",
            "[22001] ERROR: value too long for type character varying(64);\nError while executing"
            " the query (1) (SQLExecDirectW)",
        ),
        pyodbc.Error("HY107", "[HY107] Row value out of range (20) (SQLSetPos)"),
        pyodbc.Error(
            "HY000", "[HY000] Couldn't set unsupported connect attribute 113 (216) (SQLSetConnectAttr)"
        ),
        pyodbc.OperationalError(
            "08001",
            '[08001] connection to server at "127.0.0.1", port 5432 failed: FATAL:  role "nosuch" does'
            " not exist\n (101) (SQLDriverConnect)",
        ),
        pyodbc.OperationalError(
            "08001",
            '[08001] connection to server at "127.0.0.1", port 5432 failed: FATAL:  database "orders"'
            " does not exist\n (101) (SQLDriverConnect)",
        ),
        pyodbc.OperationalError(
            "08001",
            '[08001] connection to server at "db", port 5432 failed: FATAL:  password authentication'
            ' failed for user "sas"\n (101) (SQLDriverConnect)',
        ),
        pyodbc.OperationalError(
            "08001",
            '[08001] connection to server at "db", port 5432 failed: FATAL:  no pg_hba.conf entry for'
            ' host "10.0.0.4", user "sas", database "orders", no encryption\n (101) (SQLDriverConnect)',
        ),
        pyodbc.ProgrammingError(
            "42000",
            "[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Incorrect syntax near"
            " 'SELEC'. (102) (SQLExecDirectW)",
        ),
        pyodbc.IntegrityError(
            "23000",
            "[23000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Violation of PRIMARY KEY"
            " constraint 'PK_Orders'. Cannot insert duplicate key in object 'dbo.Orders'. The duplicate key"
            " value is (o-1). (2627) (SQLExecDirectW)",
        ),
        pyodbc.InterfaceError(
            "28000",
            "[28000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Login failed for user"
            " 'sas'. (18456) (SQLDriverConnect)",
        ),
        pyodbc.OperationalError(
            "08001",
            "[08001] [Microsoft][ODBC Driver 18 for SQL Server]SSL Provider: [error:0A000086:SSL"
            " routines::certificate verify failed:self-signed certificate] (-1) (SQLDriverConnect)",
        ),
    ],
    ids=repr,
)
def test_the_odbc_drivers_statement_data_and_login_errors_are_not_transient(error: BaseException) -> None:
    assert not is_transient(error)


class Observer:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.down: set[str] = set()

    def unavailable(self, dependency: str, error: BaseException) -> None:
        self.events.append(("down", dependency))
        self.down.add(dependency)

    def available(self, dependency: str) -> None:
        self.events.append(("up", dependency))
        self.down.discard(dependency)

    def is_down(self, dependency: str) -> bool:
        return dependency in self.down


class Flaky:
    """Fails with ``error`` for the first ``failures`` calls, then answers."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    def read(self, key: str) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return f"value of {key}"


# Short real waits: tenacity measures its budget on the monotonic clock.
FAST = RetryPolicy(budget=0.5, first_wait=0.001, max_wait=0.01)


def test_a_guarded_call_rides_out_transient_faults_within_its_budget() -> None:
    target, observer = Flaky(3, ServiceRequestError("refused")), Observer()
    assert guard(lambda: target, "state store", FAST, observer).read("k") == "value of k"
    assert target.calls == 4
    assert observer.events == [("up", "state store")]


def test_no_try_starts_after_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call gives up within its budget plus one try (issue 37): a wait that would end past the
    budget ends the call instead of starting a try the caller would wait a whole timeout for."""
    monkeypatch.setattr("tenacity.wait.random.uniform", lambda low, high: high)  # no jitter: the longest wait
    policy = RetryPolicy(budget=0.3, first_wait=0.2, max_wait=0.2)
    starts: list[float] = []

    def refused() -> None:
        starts.append(time.monotonic())
        raise ServiceRequestError("refused")

    with pytest.raises(ServiceRequestError):
        policy.retrying()(refused)
    assert starts and all(start - starts[0] < policy.budget for start in starts), starts
    # the call stopped because its next wait would have crossed the budget, not before
    assert starts[-1] - starts[0] + policy.max_wait >= policy.budget


def test_a_fault_outlasting_the_budget_names_the_dependency() -> None:
    target, observer = Flaky(10**9, pyodbc.OperationalError("08001", "Connection refused")), Observer()
    guarded = guard(lambda: target, "orders database", FAST, observer)
    with pytest.raises(DependencyUnavailable) as raised:
        guarded.read("k")
    assert raised.value.dependency == "orders database"
    assert isinstance(raised.value.__cause__, pyodbc.OperationalError)
    assert target.calls > 2  # retried, not given up at the first failure
    assert observer.events == [("down", "orders database")]


def test_an_error_that_would_repeat_is_not_retried() -> None:
    target, observer = Flaky(1, PreconditionFailed("etag")), Observer()
    with pytest.raises(PreconditionFailed):
        guard(lambda: target, "state store", FAST, observer).read("k")
    assert target.calls == 1
    assert observer.events == []


def test_an_adapter_whose_server_is_down_at_start_is_built_on_a_later_call() -> None:
    builds = Flaky(10**9, ServiceRequestError("refused"))
    observer = Observer()
    guarded = guard(lambda: (builds.read("x"), Flaky(0, ValueError()))[1], "state store", FAST, observer)
    with pytest.raises(DependencyUnavailable):
        guarded.read("k")
    builds.failures = builds.calls  # the server is back
    assert guarded.read("k") == "value of k"
    assert observer.events == [("down", "state store"), ("up", "state store")]


def test_while_a_dependency_is_known_down_a_call_makes_one_try_not_a_budget() -> None:
    target, observer = Flaky(10**9, ServiceRequestError("refused")), Observer()
    guarded = guard(
        lambda: target, "state store", RetryPolicy(budget=0.2, first_wait=0.001, max_wait=0.002), observer
    )
    with pytest.raises(DependencyUnavailable):
        guarded.read("k")
    first = target.calls
    assert first > 5  # the outage was not known: the whole budget
    for _ in range(20):
        with pytest.raises(DependencyUnavailable):
            guarded.read("k")
    assert target.calls == first + 20  # known: one try each


def test_while_one_call_probes_a_known_outage_the_others_do_not_call_at_all() -> None:
    release, probing = threading.Event(), threading.Event()
    calls: list[str] = []

    class Hanging:
        def read(self, key: str) -> str:
            calls.append(key)
            probing.set()
            release.wait(5)
            raise ServiceRequestError("refused")

    observer = Observer()
    observer.down.add("state store")
    guarded = guard(Hanging, "state store", FAST, observer)
    outcomes: list[BaseException] = []

    def probe() -> None:
        try:
            guarded.read("probe")
        except DependencyUnavailable as error:
            outcomes.append(error)

    prober = threading.Thread(target=probe)
    prober.start()
    assert probing.wait(5)
    with pytest.raises(DependencyUnavailable, match="another call is probing"):
        guarded.read("other")
    release.set()
    prober.join(5)
    assert calls == ["probe"] and len(outcomes) == 1


def test_the_first_success_ends_the_outage_for_every_caller() -> None:
    clock = ManualClock(T0)
    notes: list[str] = []
    monitor = OutageMonitor(clock, lambda d, r, s: notes.append("down"), lambda d, r, s: notes.append("back"))
    target = Flaky(10**9, ServiceRequestError("refused"))
    states = guard(lambda: target, "state store", FAST, monitor)
    with pytest.raises(DependencyUnavailable):
        states.read("k")
    assert monitor.is_down("state store")
    target.failures = 0  # the server is back: the next call, a probe, succeeds
    clock.advance(timedelta(minutes=30))
    assert states.read("k") == "value of k"
    assert not monitor.is_down("state store") and notes == ["down", "back"]
    [window] = monitor.windows()
    assert (window.since, window.until) == (T0, T0 + timedelta(minutes=30))


def test_ended_outages_are_kept_for_a_day() -> None:
    clock = ManualClock(T0)
    monitor = OutageMonitor(clock, lambda d, r, s: None)
    monitor.unavailable("orders database", ConnectionError("refused"))
    monitor.unavailable("state store", ConnectionError("reset"))
    monitor.available("orders database")
    assert [(w.dependency, w.until) for w in monitor.windows()] == [
        ("orders database", T0),
        ("state store", None),
    ]
    clock.advance(timedelta(days=1, seconds=1))
    assert [(w.dependency, w.until) for w in monitor.windows()] == [("state store", None)]


def test_one_outage_raises_one_alert_however_many_calls_fail() -> None:
    alerts: list[str] = []
    clock = ManualClock(T0)
    monitor = OutageMonitor(clock, lambda dependency, reason, since: alerts.append(dependency))
    for _ in range(50):
        monitor.unavailable("orders database", ConnectionError("refused"))
    monitor.unavailable("state store", ConnectionError("reset"))
    assert alerts == ["orders database", "state store"]
    assert monitor.outages()["orders database"].failures == 50
    clock.advance(timedelta(minutes=10))
    monitor.available("orders database")
    assert set(monitor.outages()) == {"state store"}
    monitor.unavailable("orders database", ConnectionError("refused"))  # a new outage
    assert alerts == ["orders database", "state store", "orders database"]


def test_an_alert_that_cannot_be_sent_does_not_fail_the_caller() -> None:
    def broken(dependency: str, reason: str, since: Any) -> None:
        raise ConnectionError("the bus is down too")

    OutageMonitor(ManualClock(T0), broken).unavailable("Service Bus", ConnectionError("refused"))


class FakeConnection:
    def __init__(self) -> None:
        self.closed = False

    def cursor(self) -> object:
        return object()

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def close(self) -> None:
        self.closed = True


def test_the_pool_reuses_a_connection_across_calls() -> None:
    pool = ConnectionPool(FakeConnection)
    with pool.connection() as first:
        pass
    with pool.connection() as second:
        pass
    assert first is second and pool.opened == 1


def test_a_transient_fault_drops_the_connection_and_the_idle_ones() -> None:
    pool = ConnectionPool(FakeConnection)
    with pool.connection() as a, pool.connection() as b:
        pass  # two idle connections now
    with pytest.raises(pyodbc.Error), pool.connection() as broken:
        raise pyodbc.Error("08S01", "server closed the connection unexpectedly")
    assert broken.closed and a.closed and b.closed
    with pool.connection() as fresh:
        assert fresh not in (a, b)


def test_an_error_of_the_statement_keeps_the_connection() -> None:
    pool = ConnectionPool(FakeConnection)
    with pytest.raises(pyodbc.IntegrityError), pool.connection() as conn:
        raise pyodbc.IntegrityError("23505", "duplicate key")
    with pool.connection() as again:
        assert again is conn and not conn.closed


def test_postponements_grow_to_a_maximum_and_stop_at_the_limit() -> None:
    policy = Postponement(first=timedelta(seconds=5), maximum=timedelta(minutes=5), limit=20)
    delays = [policy.delay(n) for n in range(21)]
    assert delays[:4] == [timedelta(seconds=s) for s in (5, 10, 20, 40)]
    assert delays[19] == timedelta(minutes=5) and delays[20] is None
    assert policy.horizon > timedelta(hours=1)


def test_the_default_postponement_resumes_within_a_supervisor_period_and_rides_out_an_hour() -> None:
    deployed = Path("infra/main.bicep").read_text()
    period = int(re.findall(r"param supervisorSchedule string = '\*/(\d+) ", deployed)[0])
    bicep = Path("infra/modules/functionapp.bicep").read_text()
    for policy in (Postponement(), Settings.from_env({}).postponement):
        assert policy.maximum <= timedelta(seconds=period)  # a copy is at most a period out
        assert policy.horizon > timedelta(hours=1)
        assert f"SAS_POSTPONE_MAX_SECONDS: '{policy.maximum.seconds}'" in bicep
        assert f"SAS_POSTPONE_LIMIT: '{policy.limit}'" in bicep
