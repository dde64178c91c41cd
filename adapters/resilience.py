"""One transient-fault policy for every dependency: which errors are worth another try, how long
to keep trying, and what a caller sees when the time is up.

``is_transient`` classifies an error from any of the drivers and SDKs behind the ports (ODBC
drivers through pyodbc, stdlib sqlite3, azure-core's HTTP SDKs, azure-servicebus). ``guard`` wraps
a port so that each call retries transient faults with exponential back-off and full jitter for
at most ``RetryPolicy.budget``, then raises ``DependencyUnavailable`` naming the dependency; it
also tells an ``OutageObserver`` when a dependency stops and starts answering, which is how one
outage makes one operator alert. While the observer knows a dependency is down, a call makes one
try (a probe) instead of a budget of them, and while one call probes, the others give up
without calling: an outage the process knows about costs a caller one try, not the budget.
Errors that are not transient (a bug, a refused write, a conflict) pass through at once,
untouched: retrying them would only delay the same answer.

What a caller does once the budget is spent is the caller's business (docs/operating.md "Transient
faults"): a submission comes back later on a scheduled message, an orchestration retries the
activity on a durable timer, the starter and the Supervisor wait for their next tick.
"""

import logging
import re
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError
from opentelemetry import metrics
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_before_delay,
    wait_random_exponential,
)

from domain.errors import DependencyUnavailable

log = logging.getLogger("sas.resilience")
# Every try of every call to a dependency, by dependency and operation: what the dependency bills
# (a Cosmos DB request and its RUs, a SQL transaction, a Service Bus operation), retries included.
dependency_calls = metrics.get_meter("sas").create_counter(
    "sas.dependency.calls", description="tries of calls to a dependency, by dependency and operation"
)

# HTTP statuses that say "not now" rather than "no": timeouts, throttling (Cosmos's 429 and
# 449 retry-with), and the gateway family. Cosmos's 410 Gone is left to its SDK.
TRANSIENT_HTTP_STATUSES = frozenset({408, 429, 449, 500, 502, 503, 504})

# SQLSTATEs (ODBC and PostgreSQL): class 08 is every connection exception; HYT00/HYT01 are
# ODBC's query and login timeouts; 40001 and 40P01 are serialization failures and deadlocks
# (the statement was rolled back and can run again); 57P01-57P03 are a PostgreSQL server
# shutting down, crashed or starting; 53300 is too many connections. IMC01-IMC06 are ODBC Driver
# 18's idle-connection resiliency giving up: the connection broke and could not be restored in
# place, so the pool drops it and the next try dials anew (the states' table in "Connection
# resiliency in the ODBC driver", https://learn.microsoft.com/sql/connect/odbc/connection-resiliency).
_TRANSIENT_SQLSTATES = frozenset(
    {"HYT00", "HYT01", "40001", "40P01", "57P01", "57P02", "57P03", "53300"}
    | {"IMC01", "IMC02", "IMC03", "IMC04", "IMC05", "IMC06"}
)

# Azure SQL's transient error numbers, which ODBC Driver 18 writes as "(40613)" in the message
# (Microsoft's list for Azure SQL Database and the one Entity Framework retries): 40613 is a
# database that is not available yet, e.g. resuming from serverless auto-pause; 40197, 40501,
# 49918-49920 are service errors and busy; 10928/10929 resource limits; 4060/4221 a login while
# the database is moving; 10053/10054/10060, 233, 64, 121, 20 broken or timed-out transports;
# 1205 a deadlock victim.
_TRANSIENT_SQLSERVER_ERRORS = frozenset(
    {20, 64, 121, 233, 1205, 4060, 4221, 10053, 10054, 10060, 10928, 10929, 40197, 40501, 40613}
    | {42108, 42109, 49918, 49919, 49920}
)
# pyodbc writes a record's native error as "(N)" after its text: before " (SQLExecDirectW)" for the
# first record, before "; [" or the end for the others (its src/errors.cpp). Only ODBC Driver 18's
# numbers are SQL Server's: psqlODBC numbers its own errors (20 is a row out of range), and a
# message may hold a "(64)" of its own (PostgreSQL's "value too long for type character varying(64)").
_NATIVE_ERROR = re.compile(r"\((\d+)\)(?= \(SQL\w+\)|; \[|$)")
_SQLSERVER_TAG = "SQL Server]"  # "[Microsoft][ODBC Driver 18 for SQL Server]", "[SQL Server]"

# Not weather, though under a connection SQLSTATE. psqlODBC reports every failed login as 08001
# (connection.c LIBPQ_connect sets CONNECTION_SERVER_NOT_REACHED, which environ.c maps), the
# server's refusal too, and libpq words it "connection to server at ... failed: FATAL: ..." as it
# does a refused connection. The refusals are PostgreSQL's (src/backend/libpq/auth.c auth_failed
# and ClientAuthentication; src/backend/utils/init/miscinit.c InitializeSessionUserId, postinit.c
# InitPostgres: role or database "x" does not exist) and libpq's for a missing password
# (fe-auth.c). ODBC Driver 18 reports a server certificate it does not trust as 08001 too
# (https://learn.microsoft.com/sql/connect/odbc/connection-troubleshooting; on Linux, OpenSSL's
# "certificate verify failed"). Retrying them only delays the same answer, and makes an outage
# alert of what is configuration.
_LOGIN_REFUSED_TEXTS = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "does not exist",
    "is not permitted to log in",
    "no password supplied",
    "certificate verify failed",
    "certificate chain was issued by an authority that is not trusted",
    "target principal name is incorrect",
)

# What the drivers say when their server or file is momentarily gone. The texts decide where the
# SQLSTATE does not: a driver may report a lost connection under a general error's HY000.
_TRANSIENT_DRIVER_TEXTS = (
    # libpq's (src/interfaces/libpq), which psqlODBC passes on, and the server's FATAL as it stops.
    "server closed the connection unexpectedly",
    "could not connect to server",
    "connection to server",
    "no connection to the server",
    "terminating connection",
    "could not receive data from server",
    "could not send data to server",
    "Connection refused",
    "Connection reset",
    "timeout expired",
    # psqlODBC's own: github.com/postgresql-interfaces/psqlodbc, the same in tags REL-10_03_0000 to
    # REL-18_00_0002 (Debian bookworm's odbc-postgresql is 13.02). A lost connection is 08S01 where
    # psqlODBC's error number says so (statement.c Statement_sqlstate[], environ.c
    # PGAPI_ConnectError), but HY000 where the loss ends a general error: a reset while it prepares
    # a statement's parameters raises "[HY000] The connection has been lost;\nError while preparing
    # parameters" (convert.c desc_params_and_sync), as a cut in the middle of any of the orders
    # repository's statements does (tests/faults/test_odbc_connection_loss.py).
    # - connection.c handle_pgres_error; statement.c RequestStart, SC_set_errorinfo; execute.c:
    "The connection has been lost",
    # - odbcapi.c SC_connection_lost_check, on any later call on a connection already lost:
    "unable due to the connection lost",
    # - connection.c CC_send_query: "The connection is down\nFailed to send '...'":
    "The connection is down",
    # - connection.c CC_from_PGresult, statement.c SC_set_errorinfo ("occured" before 17.00):
    "communication error occur",
    # - statement.c SC_execute: "Could not receive the response, communication down ??":
    "communication down",
    # Microsoft ODBC Driver 18 for SQL Server. Its network failures read "Communication link failure",
    # the name of 08S01 in ODBC's error codes
    # (https://learn.microsoft.com/sql/odbc/reference/appendixes/appendix-a-odbc-error-codes) and the
    # first of the intermittent network errors in
    # https://learn.microsoft.com/troubleshoot/sql/database-engine/connect/intermittent-periodic-network-issue,
    # or name its transport layer, "TCP Provider: Error code 0x68" (ECONNRESET) and the like (the
    # transport-level errors of
    # https://learn.microsoft.com/azure/azure-sql/database/troubleshoot-common-errors-issues).
    # "Login timeout expired" and "Query timeout expired" are HYT00 (above). On Linux pyodbc keeps
    # only a failure's first diagnostic record (its src/errors.cpp): these are that record's texts.
    "Communication link failure",
    "TCP Provider",
    # SQLite's busy file (sqlite3 and SQLite-ODBC).
    "database is locked",
    "database table is locked",
)

# azure-servicebus marks auth errors retryable too; those are configuration, not weather.
_TRANSIENT_SERVICEBUS_ERRORS = frozenset(
    {
        "ServiceBusConnectionError",
        "ServiceBusCommunicationError",
        "ServiceBusServerBusyError",
        "OperationTimeoutError",
    }
)


def _is_dbapi_error(error: BaseException) -> bool:
    # DB-API 2.0: every driver's exceptions derive from a class named Error (sqlite3, pyodbc).
    return any(
        cls.__name__ == "Error" and cls.__module__ in ("pyodbc", "sqlite3") for cls in type(error).__mro__
    )


def _is_transient_sql(error: BaseException) -> bool:
    if isinstance(error, sqlite3.OperationalError):
        return any(text in str(error) for text in _TRANSIENT_DRIVER_TEXTS)
    sqlstate = str(error.args[0]) if error.args else ""
    message = str(error.args[-1]) if error.args else ""  # pyodbc's args: (SQLSTATE, message)
    if sqlstate == "08001" and any(text in message for text in _LOGIN_REFUSED_TEXTS):
        return False
    if sqlstate.startswith("08") or sqlstate in _TRANSIENT_SQLSTATES:
        return True
    if _SQLSERVER_TAG in message and any(
        int(number) in _TRANSIENT_SQLSERVER_ERRORS for number in _NATIVE_ERROR.findall(message)
    ):
        return True
    return any(text in message for text in _TRANSIENT_DRIVER_TEXTS)


def is_transient(error: BaseException) -> bool:
    """True when the same call may well succeed later: a dependency that is down, busy,
    throttling or unreachable. False for everything that would fail the same way again."""
    if isinstance(error, DependencyUnavailable):
        return True
    if isinstance(error, ServiceRequestError | ServiceResponseError):
        return True  # no answer at all: refused, reset, timed out, DNS
    if isinstance(error, HttpResponseError):
        return error.status_code in TRANSIENT_HTTP_STATUSES
    if type(error).__name__ in _TRANSIENT_SERVICEBUS_ERRORS:
        return True
    if _is_dbapi_error(error):
        return _is_transient_sql(error)
    return isinstance(error, ConnectionError | TimeoutError)


@dataclass(frozen=True)
class RetryPolicy:
    """How long one call to a dependency keeps trying (``budget`` seconds from its first try),
    and how long it waits between tries: random in [0, min(max_wait, first_wait * 2**n)]
    (full jitter, so callers that failed together do not retry together).

    No try starts after the budget (a wait that would end past it ends the call instead), so a
    call gives up within the budget plus one try, and each try is bounded by the adapters'
    timeouts: the caller of a stalled store hears within budget + one timeout (issue 37)."""

    budget: float = 10.0
    first_wait: float = 0.2
    max_wait: float = 5.0
    # tenacity's sleep; tests replace it to run the schedule without waiting.
    sleep: Callable[[float], None] | None = None

    def __post_init__(self) -> None:
        if self.budget < 0 or self.first_wait <= 0 or self.max_wait < self.first_wait:
            raise ValueError("need budget >= 0 and 0 < first_wait <= max_wait")

    def retrying(self) -> Retrying:
        extra: dict[str, Any] = {} if self.sleep is None else {"sleep": self.sleep}
        return Retrying(
            retry=retry_if_exception(is_transient),
            wait=wait_random_exponential(multiplier=self.first_wait, max=self.max_wait),
            stop=stop_before_delay(self.budget),
            reraise=True,
            before_sleep=_log_retry,
            **extra,
        )


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome is not None else None
    log.debug("transient fault, try %d failed: %s", state.attempt_number, error)


class OutageObserver(Protocol):
    def unavailable(self, dependency: str, error: BaseException) -> None:
        """A call to ``dependency`` failed on transient faults for a whole retry budget."""
        ...

    def available(self, dependency: str) -> None:
        """A call to ``dependency`` succeeded (cheap when nothing was wrong)."""
        ...

    def is_down(self, dependency: str) -> bool:
        """``dependency`` gave up and has not answered since (cheap when nothing is wrong)."""
        ...


class _Guarded:
    """Every public method of the target, retried under the policy (see ``guard``)."""

    def __init__(
        self, build: Callable[[], object], dependency: str, policy: RetryPolicy, observer: OutageObserver
    ) -> None:
        self._build = build
        self._target: object | None = None
        self._lock = threading.Lock()
        self._dependency = dependency
        self._policy = policy
        self._observer = observer
        self._probing = threading.Lock()  # held by the one call that probes a known outage

    def _resolved(self) -> object:
        if self._target is None:
            with self._lock:
                if self._target is None:
                    self._target = self._build()
        return self._target

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._target is not None and not callable(member := getattr(self._target, name)):
            return member  # a plain attribute (e.g. a pool's counters): nothing to retry
        attributes = {"dependency": self._dependency, "operation": name}

        def attempt(*args: Any, **kwargs: Any) -> Any:
            dependency_calls.add(1, attributes)
            return getattr(self._resolved(), name)(*args, **kwargs)

        return lambda *args, **kwargs: self._run(lambda: attempt(*args, **kwargs))

    def close(self) -> None:
        """Close the adapter if it was ever built (its connections, files); never builds one."""
        close = getattr(self._target, "close", None)
        if callable(close):
            close()

    def _run(self, call: Callable[[], Any]) -> Any:
        if self._observer.is_down(self._dependency):
            return self._probe(call)
        try:
            result = self._policy.retrying()(call)
        except Exception as error:
            if not is_transient(error):
                raise
            outage = self._gave_up(error)
            if outage is error:
                raise
            raise outage from error
        self._observer.available(self._dependency)
        return result

    def _probe(self, call: Callable[[], Any]) -> Any:
        """One try of a call to a dependency known to be down; none while another call probes."""
        if not self._probing.acquire(blocking=False):
            error = DependencyUnavailable(self._dependency, "known to be down; another call is probing it")
            self._observer.unavailable(self._dependency, error)
            raise error
        try:
            result = call()
        except Exception as error:
            if not is_transient(error):
                raise
            outage = self._gave_up(error)
            if outage is error:
                raise
            raise outage from error
        finally:
            self._probing.release()
        self._observer.available(self._dependency)
        return result

    def _gave_up(self, error: Exception) -> DependencyUnavailable:
        """Tell the observer; the error the caller sees (``error`` itself if it already is one)."""
        self._observer.unavailable(self._dependency, error)
        if isinstance(error, DependencyUnavailable):
            return error
        return DependencyUnavailable(self._dependency, f"{type(error).__name__}: {error}")

    def __repr__(self) -> str:
        return f"guard({self._dependency!r}, {self._target!r})"


def guard[T](build: Callable[[], T], dependency: str, policy: RetryPolicy, observer: OutageObserver) -> T:
    """The adapter ``build`` makes, with every method call retried on transient faults under
    ``policy``; when the budget is spent, the call raises ``DependencyUnavailable(dependency)``
    (from the last error).

    The adapter is built on the first call, inside the same retries: some constructors talk to
    their server (the Cosmos client reads the account, the lease creates its container), and a
    server that is down when a worker starts is an outage like any other, not a start-up crash
    repeated on every invocation.

    Only ports whose every method is safe to repeat are guarded: reads, conditional writes
    (a repeated ``If-Match`` write fails 412 and the fenced write re-reads), inserts keyed by
    the OrderID, sends with a stable MessageId (the broker drops the copy).
    """
    return cast(T, _Guarded(build, dependency, policy, observer))
