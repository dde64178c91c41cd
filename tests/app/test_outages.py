"""Outages of the stores under the app, with real connection faults (harness/standins/fault_proxy.py).

The emulators profile on devhost: orders in PostgreSQL over psqlODBC, state in the Cosmos DB API
server, each behind a fault-injecting TCP proxy; the compensation log in Azurite. 200 orders go
through while the orders database refuses every connection for ten minutes, then while the state
store resets every connection for three. Nothing valid is dead-lettered, every order ends
Processed, each remote step took effect exactly once, and each outage raised one alert.

Time is devhost's virtual clock, so the outages last their real lengths, against the production
recovery policy, the orchestrator's activity retries and the postponement's 5-minute cap. Cut
for speed: the per-call retry budget (SAS_RETRY_BUDGET_SECONDS is real seconds: 0.05 here, 10 by
default), since a refused connection fails at once and its retries only add wall-clock time; and
the first postponement (60 s here, 5 s by default), so the ten minutes take 4 rounds through the
queue instead of 7. With the defaults each call would try for 10 s before postponing: the same
story, 10 s later per round.
"""

import asyncio
import functools
import io
import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from azure.cosmos import CosmosClient, PartitionKey
from rich.console import Console

from adapters.cosmos.state_store import CosmosStateStore
from adapters.sql.orders import POSTGRESQL, pyodbc_orders_repository
from adapters.sql.schema import POSTGRESQL_SCHEMA
from domain.endings import Notice
from domain.messages import AgentRequest
from domain.policy import Postponement
from domain.record import StateRecord
from domain.sample_workflow import ORDER_WORKFLOW_V1
from domain.states import TERMINAL_STATES, ProcessState
from domain.transitions import is_awaiting_order_row
from domain.workflow import Runs
from harness.standins.fault_proxy import FaultProxy, Mode
from harness.standins.ports import free_port
from ops.cli import EXIT_UNAVAILABLE, main
from settings import Settings
from tests.support.app import App, emulators_settings, order_body, start_app, submission
from tests.support.emulators import EMULATOR_KEY, cosmos_server, empty_compensation_log, new_postgres_database
from tests.support.scripted_agent import Answer

# The Cosmos DB server, Azurite and PostgreSQL behind fault proxies.
pytestmark = pytest.mark.emulators

ORDERS = 200
SQL_OUTAGE = timedelta(minutes=10)
STORE_OUTAGE = timedelta(minutes=3)


@dataclass
class Stack:
    app: App
    sql: FaultProxy
    cosmos: FaultProxy
    # The test's own view of the state, straight to the server: the app's goes through the proxy.
    states: CosmosStateStore
    orders: str  # the orders database's ODBC connection string, straight to the server

    def count(self, states: frozenset[ProcessState]) -> int:
        return self.states.count_in_states(states)

    def outage(self, proxy: FaultProxy, mode: Mode, length: timedelta) -> datetime:
        """``mode`` from now for ``length`` of virtual time; returns when it ends."""
        clock = self.app.host.clock
        end = clock.now() + length
        proxy.set_mode(lambda: mode if clock.now() < end else "pass")
        return end


def _with_port(connection_string: str, port: int) -> str:
    return re.sub(r"Port=\d+", f"Port={port}", connection_string)


# What the app runs with here; the per-call retry budget is cut for speed (see above).
FAST_RETRIES = {
    "SAS_RETRY_BUDGET_SECONDS": "0.05",
    "SAS_RETRY_FIRST_WAIT_SECONDS": "0.01",
    "SAS_RETRY_MAX_WAIT_SECONDS": "0.02",
}


@contextmanager
def running_stack(
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    postgres_odbc: str,
    azurite_tables: str,
    **settings: str,
) -> Iterator[Stack]:
    # What the post-provision script and Bicep create in Azure: the schema, the container, the table.
    orders = new_postgres_database(postgres_odbc)
    pyodbc_orders_repository(orders, POSTGRESQL, POSTGRESQL_SCHEMA)
    empty_compensation_log(azurite_tables)
    sql_port = int(re.findall(r"Port=(\d+)", orders)[0])
    cosmos_port = free_port()
    with (
        FaultProxy(("127.0.0.1", sql_port)) as sql,
        FaultProxy(("127.0.0.1", cosmos_port)) as cosmos,
        cosmos_server(cosmos_port, advertised_port=cosmos.port) as direct,
    ):
        client = CosmosClient(
            direct, credential=EMULATOR_KEY, connection_verify=False, enable_endpoint_discovery=False
        )
        container = client.create_database("sas").create_container("orderState", PartitionKey("/OrderID"))
        app = start_app(
            loop,
            tmp_path,
            monkeypatch,
            settings=emulators_settings(
                cosmos=f"AccountEndpoint=https://127.0.0.1:{cosmos.port}/;AccountKey={EMULATOR_KEY};",
                sql=_with_port(orders, sql.port),
                dialect="postgresql",
                tables=azurite_tables,
                **(FAST_RETRIES | settings),
            ),
        )
        try:
            yield Stack(app, sql, cosmos, CosmosStateStore(container, emulator=True), orders)
        finally:
            app.stop()


# Fewer rounds through the queue than the defaults (5 s doubling to 30 s: each round is 200
# invocations) where a test is about riding an outage out; how soon the defaults resume after
# one is tested on its own (test_an_order_accepted_while_the_orders_database_is_down_...).
FEWER_ROUNDS = {"SAS_POSTPONE_FIRST_SECONDS": "60", "SAS_POSTPONE_MAX_SECONDS": "300"}


StartStack = Callable[..., AbstractContextManager[Stack]]  # running_stack, given the app's settings


@pytest.fixture
def start_stack(
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    postgres_odbc: str,
    azurite_tables: str,
) -> StartStack:
    return functools.partial(running_stack, loop, tmp_path, monkeypatch, postgres_odbc, azurite_tables)


@pytest.fixture
def stack(start_stack: StartStack) -> Iterator[Stack]:
    with start_stack(**FEWER_ROUNDS) as running:
        yield running


def test_orders_ride_out_a_database_outage_and_a_state_store_outage(stack: Stack) -> None:
    app = stack.app
    ids = [f"o-{n:03d}" for n in range(ORDERS)]
    sql_back = stack.outage(stack.sql, "refuse", SQL_OUTAGE)
    # The front end reads only the state store, which is up: it accepts while SQL is down.
    assert app.http("POST", "/api/orders", order_body(ids[0]))[0] == 202
    for order_id in ids[1:]:
        app.submit(submission(order_id))

    # The orders database refuses every connection: every submission is postponed, none is lost.
    app.run_until(lambda: app.host.clock.now() >= sql_back)
    # Nothing got past the orders database: every order is held, findable and unclaimed.
    assert stack.count(frozenset({ProcessState.PENDING})) == ORDERS
    assert stack.count(frozenset(ProcessState) - {ProcessState.PENDING}) == 0
    assert app.dead_letters("orders") == []
    assert stack.sql.stats().accepted > ORDERS  # every submission tried, and more than once

    # Back: orders flow. Once some are through, the state store resets every connection.
    app.run_until(lambda: stack.count(TERMINAL_STATES) >= ORDERS // 4)
    assert stack.count(TERMINAL_STATES) < ORDERS  # the next outage hits orders in flight
    store_back = stack.outage(stack.cosmos, "reset", STORE_OUTAGE)
    status, body, headers = app.http("POST", "/api/orders", order_body("web-late"))
    assert (status, json.loads(body)["error"]) == (503, "ServiceUnavailable")  # nothing accepted
    assert int(headers["Retry-After"]) > 0
    app.run_until(lambda: app.host.clock.now() >= store_back)
    assert stack.cosmos.stats().reset > 0

    app.run_until(lambda: stack.count(TERMINAL_STATES) == ORDERS, days=1)
    assert stack.count(frozenset({ProcessState.PROCESSED})) == ORDERS
    assert stack.states.get("web-late") is None
    assert app.dead_letters("orders") == []
    remote = [step for step in ORDER_WORKFLOW_V1.steps if step.runs is Runs.AGENT]
    for order_id in ids:
        for step in remote:
            assert app.agent.net_effect(order_id, step.name) == 1, (order_id, step.name)
            assert app.agent.net_effect(order_id, step.compensation or "") == 0, (order_id, step.name)
    outages = [a for a in app.alerts() if a["Event"] == "DependencyUnavailable"]
    assert sorted(a["Reason"].split(" is unavailable")[0] for a in outages) == [
        "the orders database",
        "the state store",
    ]
    recovered = [a for a in app.alerts() if a["Event"] == "DependencyRecovered"]
    assert sorted(a["Reason"].split(" is available")[0] for a in recovered) == [
        "the orders database",
        "the state store",
    ]
    assert len(app.alerts()) == 4
    completed = [s for s in app.statuses("status-app-a") if s["Status"] == "completed"]
    assert sorted(s["OrderID"] for s in completed) == ids


# --- An outage costs an order nothing (issue 26) -----------------------------------------------

BURST = 100
LONG_OUTAGE = timedelta(minutes=30)  # past every retry of the recovery policy (about 20 minutes)


def _records(stack: Stack) -> list[StateRecord]:
    return [s.record for state in ProcessState for s in stack.states.query_in_state(state, 10 * BURST)]


def _burst_then_outage(stack: Stack, proxy: FaultProxy, mode: Mode) -> tuple[list[str], datetime]:
    """A burst of orders; once a quarter are through, ``proxy`` fails for LONG_OUTAGE."""
    app = stack.app
    ids = [f"b-{n:03d}" for n in range(BURST)]
    for order_id in ids:
        app.submit(submission(order_id))
    app.run_until(lambda: stack.count(TERMINAL_STATES) >= BURST // 4)
    assert stack.count(frozenset({ProcessState.PROCESSING})) > 0  # the outage hits orders in flight
    return ids, stack.outage(proxy, mode, LONG_OUTAGE)


def _cost_the_orders_nothing(stack: Stack, ids: list[str], dependency: str) -> None:
    app = stack.app
    records = _records(stack)
    assert sorted(r.OrderID for r in records if r.ProcessState is ProcessState.PROCESSED) == ids
    assert [(r.OrderID, r.FailureCount) for r in records if r.FailureCount] == []
    # The outage did end attempts: they were held and tried again, uncounted.
    assert any(r.OutageHolds for r in records)
    assert app.dead_letters("orders") == []
    remote = [step for step in ORDER_WORKFLOW_V1.steps if step.runs is Runs.AGENT]
    for order_id in ids:
        for step in remote:
            assert app.agent.net_effect(order_id, step.name) == 1, (order_id, step.name)
    events = [(a["Event"], a["Reason"].split(" is ")[0]) for a in app.alerts()]
    assert sorted(events) == [
        ("DependencyRecovered", f"the {dependency}"),
        ("DependencyUnavailable", f"the {dependency}"),
    ]


def ops(*argv: str) -> tuple[int, str]:
    """``python -m ops`` in this process, on the app's settings and the host's clock."""
    out = io.StringIO()
    code = main(list(argv), Console(file=out, width=200))
    return code, out.getvalue()


def _waiting_on(stack: Stack, dependency: str) -> list[str]:
    """The orders whose record names ``dependency`` as what they wait on, read straight from the store."""
    return [
        s.record.OrderID
        for state in (ProcessState.PENDING, ProcessState.PROCESSING)
        for s in stack.states.query_in_state(state, 10 * BURST)
        if s.record.Unavailable == dependency
    ]


def test_a_30_minute_orders_database_outage_during_a_burst_costs_no_order_a_recovery(stack: Stack) -> None:
    app = stack.app
    ids, back = _burst_then_outage(stack, stack.sql, "refuse")
    # The operator sees the outage (issue 37): the orders waiting on the orders database, counted
    # by ops watch as the store holds them, and named by ops status and ops show.
    app.run_until(lambda: bool(_waiting_on(stack, "orders database")))
    waiting = _waiting_on(stack, "orders database")
    alerts = len(app.alerts())
    code, text = ops("--json", "watch", "--once")
    assert code == 0
    rows = {r.get("Unavailable"): r["orders"] for r in json.loads(text) if r.get("Unavailable")}
    assert rows == {"orders database": len(waiting)}
    code, text = ops("--json", "status", waiting[0])
    assert code == 0 and json.loads(text)[0]["Unavailable"] == "orders database"
    code, text = ops("show", waiting[0])
    assert code == 0 and "waiting on the orders database" in text
    assert len(app.alerts()) == alerts  # ops met the outage and told no one but its operator
    app.run_until(lambda: app.host.clock.now() >= back)
    assert stack.sql.stats().reset > 0
    assert stack.count(frozenset({ProcessState.ERROR})) == 0
    app.run_until(lambda: stack.count(TERMINAL_STATES) == BURST, days=1)
    _cost_the_orders_nothing(stack, ids, "orders database")


def test_a_30_minute_state_store_outage_costs_no_order_a_recovery_and_callers_hear_at_once(
    start_stack: StartStack,
) -> None:
    # A whole retry budget of 1 s: dozens of tries, where a caller of a known outage makes one.
    with start_stack(
        SAS_RETRY_BUDGET_SECONDS="1",
        SAS_RETRY_MAX_WAIT_SECONDS="0.05",
        **FEWER_ROUNDS,
    ) as stack:
        app = stack.app
        ids, back = _burst_then_outage(stack, stack.cosmos, "reset")
        known = app.host.clock.now() + timedelta(minutes=1)
        app.run_until(lambda: app.host.clock.now() >= known)  # the starter and Supervisor met it

        # Each caller hears at once: one try of the store, not a budget of them (a try is one
        # request; the bound leaves room for the SDK's own account reads beside it).
        asked = 20
        connections = []
        for n in range(asked):
            before = stack.cosmos.stats().accepted
            status, body, headers = app.http("POST", "/api/orders", order_body(f"web-{n}"))
            assert (status, json.loads(body)["error"]) == (503, "ServiceUnavailable")
            assert int(headers["Retry-After"]) > 0
            connections.append(stack.cosmos.stats().accepted - before)
        assert max(connections) <= 3, connections

        # ops says the store is down, in its own output and exit code, and alerts no one.
        alerts = len(app.alerts())
        for command in (["status", ids[0]], ["show", ids[0]], ["watch", "--once"]):
            code, text = ops(*command)
            assert (code, "state store" in text) == (EXIT_UNAVAILABLE, True), (command, text)
        assert len(app.alerts()) == alerts

        app.run_until(lambda: app.host.clock.now() >= back)
        app.run_until(lambda: stack.count(TERMINAL_STATES) == BURST, days=1)
        _cost_the_orders_nothing(stack, ids, "state store")
        assert all(stack.states.get(f"web-{n}") is None for n in range(asked))


# --- Every caller hears within the budget, from a store that never answers (issue 37) ---------

DEPLOYED = Settings.from_env({})  # the defaults, which infra/modules/functionapp.bicep deploys


def test_the_first_503_of_a_stalled_state_store_comes_within_the_budget_and_one_timeout(
    start_stack: StartStack,
) -> None:
    # The deployed retry budget and timeouts (real seconds): this test waits about one budget.
    with start_stack(
        SAS_RETRY_BUDGET_SECONDS=str(DEPLOYED.retry_budget_seconds),
        SAS_RETRY_FIRST_WAIT_SECONDS=str(DEPLOYED.retry_first_wait_seconds),
        SAS_RETRY_MAX_WAIT_SECONDS=str(DEPLOYED.retry_max_wait_seconds),
        SAS_CONNECT_TIMEOUT_SECONDS=str(DEPLOYED.connect_timeout_seconds),
        SAS_CALL_TIMEOUT_SECONDS=str(DEPLOYED.call_timeout_seconds),
    ) as stack:
        app = stack.app
        # A front end that has talked to the store: its client built, its connections pooled.
        assert app.http("POST", "/api/orders", order_body("before"))[0] == 202
        stack.cosmos.set_mode("stall")  # bytes accepted and never answered, not refused
        started = time.monotonic()
        status, body, headers = app.http("POST", "/api/orders", order_body("during"))
        waited = time.monotonic() - started
        assert (status, json.loads(body)["error"]) == (503, "ServiceUnavailable"), body
        assert int(headers["Retry-After"]) > 0
        # What the feature promises, not a speed: no try starts after the budget, and a try of a
        # stalled store ends at its timeout (the handshake's on a new connection, the answer's on
        # a pooled one). Before issue 37 the first caller waited the budget plus two timeouts.
        one_timeout = max(DEPLOYED.connect_timeout_seconds, DEPLOYED.call_timeout_seconds)
        assert waited < DEPLOYED.retry_budget_seconds + one_timeout, waited
        stats = stack.cosmos.stats()
        assert stats.held_bytes_to_target > 0 or stats.waiting > 0, stats  # it was a stall
        stack.cosmos.set_mode("pass")
        app.run_until(lambda: stack.states.get("before") is not None)


# --- An accepted order is findable at once, and resumes when the database answers (issue 37) --

FOUND = 20


def _held(stack: Stack, ids: list[str]) -> list[str]:
    """The orders whose state record waits for its order row, read straight from the store."""
    return [i for i in ids if (s := stack.states.get(i)) is not None and is_awaiting_order_row(s.record)]


def _outage_at_the_longest_wait(policy: Postponement) -> timedelta:
    """An outage in which every copy has grown to the longest wait and waited it twice, so the
    restore finds every copy a whole period out at worst: what the release is measured against.
    A longer outage only repeats that last round (each costs the queue FOUND deliveries)."""
    grown, postponed = timedelta(0), 0
    while (delay := policy.delay(postponed)) is not None and delay < policy.maximum:
        grown += delay
        postponed += 1
    return grown + 2 * policy.maximum


def test_an_order_accepted_while_the_orders_database_is_down_is_found_at_once_and_resumes_within_a_period(
    start_stack: StartStack,
) -> None:
    # The deployed postponement schedule (5 s doubling to one Supervisor period, 30 s).
    with start_stack() as stack:
        app = stack.app
        postponement = Postponement()  # the defaults, as deployed (tests/unit/test_resilience.py)
        ids = [f"f-{n:03d}" for n in range(FOUND)]
        back = stack.outage(stack.sql, "refuse", _outage_at_the_longest_wait(postponement))
        cut = app.host.clock.now()
        status, body, _ = app.http("POST", "/api/orders", order_body(ids[0]))
        assert status == 202
        status_url = json.loads(body)["statusUrl"]
        for order_id in ids[1:]:
            app.submit(submission(order_id))

        # Findable from the first delivery: held, waiting on the orders database, never claimed.
        app.run_until(lambda: len(_held(stack, ids)) == FOUND)
        assert app.host.clock.now() - cut < postponement.first  # the first delivery, not a copy
        status, body, _ = app.http("GET", status_url)
        view = json.loads(body)
        assert status == 200, body
        waiting = (view["ProcessState"], view["Unavailable"], view["Attempt"])
        assert waiting == ("Pending", "orders database", 0)
        code, text = ops("--json", "status", ids[0])
        assert code == 0 and json.loads(text)[0]["Unavailable"] == "orders database"
        code, text = ops("--json", "watch", "--once")
        rows = {r.get("Unavailable"): r["orders"] for r in json.loads(text) if r.get("Unavailable")}
        assert code == 0 and rows == {"orders database": FOUND}
        # A repeat of the post is the same order, not a conflict; another order under its ID is one.
        assert app.http("POST", "/api/orders", order_body(ids[0]))[0] == 202
        assert app.http("POST", "/api/orders", order_body(ids[0], Customer="Fabrikam"))[0] == 409
        app.run_until(lambda: app.host.clock.now() >= back)
        assert len(_held(stack, ids)) == FOUND
        assert stack.count(frozenset(ProcessState) - {ProcessState.PENDING}) == 0

        # The database answers: every postponed copy is at most one period out, not a back-off,
        # so the first copy gets through within a period of the restore, and the last within a
        # period of that first success (DependencyRecovered).
        released: dict[str, datetime] = {}

        def all_released() -> bool:
            now = app.host.clock.now()
            held = _held(stack, [i for i in ids if i not in released])
            released.update({i: now for i in ids if i not in released and i not in held})
            return len(released) == FOUND

        app.run_until(all_released)
        first, last = min(released.values()), max(released.values())
        period = postponement.maximum + timedelta(seconds=1)  # a second for the calls themselves
        assert first - back <= period, (first, back)
        assert last - first <= period, (first, last)
        app.run_until_terminal(*ids)
        records = [r for r in _records(stack) if r.OrderID in ids]
        assert sorted((r.OrderID, r.ProcessState, r.Attempt, r.FailureCount) for r in records) == [
            (i, ProcessState.PROCESSED, 1, 0) for i in ids
        ]
        assert app.dead_letters("orders") == []
        remote = [step for step in ORDER_WORKFLOW_V1.steps if step.runs is Runs.AGENT]
        for order_id in ids:
            for step in remote:
                assert app.agent.net_effect(order_id, step.name) == 1, (order_id, step.name)
        received = [s["OrderID"] for s in app.statuses("status-app-a") if s["Status"] == "received"]
        assert sorted(received) == ids  # each told once
        events = sorted((a["Event"], a["Reason"].split(" is ")[0]) for a in app.alerts())
        assert events == [
            ("DependencyRecovered", "the orders database"),
            ("DependencyUnavailable", "the orders database"),
        ]


def test_a_held_order_whose_copies_run_out_ends_in_error_and_its_dead_letter_brings_it_in_once(
    start_stack: StartStack,
) -> None:
    # Two postponements (5 s, then 10 s): the copies run out well inside a 10-minute outage.
    with start_stack(SAS_POSTPONE_LIMIT="2") as stack:
        app = stack.app
        back = stack.outage(stack.sql, "refuse", SQL_OUTAGE)
        status, body, _ = app.http("POST", "/api/orders", order_body("gone-1"))
        assert status == 202
        status_url = json.loads(body)["statusUrl"]

        # The copies run out: dead-lettered, the held record in Error naming its dead letter (not
        # Pending for ever), the alert naming the order, and nothing claimed without its row.
        app.run_until(lambda: len(app.dead_letters("orders")) == 1)
        assert app.host.clock.now() < back  # given up while the database is still down
        [dead] = app.dead_letters("orders")
        assert dead.dead_letter_reason == "DependencyUnavailable"
        record = app.record("gone-1")
        assert record.ProcessState is ProcessState.ERROR and record.Attempt == 0
        assert dead.message_id in (record.LastError or "")
        status, body, _ = app.http("GET", status_url)
        assert status == 200 and json.loads(body)["ProcessState"] == "Error", body
        rejected = [a for a in app.alerts() if a["Event"] == "SubmissionRejected"]
        assert [a["OrderID"] for a in rejected] == ["gone-1"]
        assert f"ops dlq resubmit orders {dead.message_id}" in rejected[0]["Reason"]

        # The database answers; the operator does what the alert says, and the order runs once.
        app.run_until(lambda: app.host.clock.now() >= back)
        code, text = ops("dlq", "resubmit", "orders", dead.message_id)
        assert code == 0, text
        app.run_until(lambda: app.record("gone-1").Attempt == 1 and app.terminal("gone-1"))
        record = app.record("gone-1")
        assert (record.ProcessState, record.Attempt, record.FailureCount) == (ProcessState.PROCESSED, 1, 0)
        assert app.dead_letters("orders") == []
        for step in ORDER_WORKFLOW_V1.steps:
            if step.runs is Runs.AGENT:
                assert app.agent.net_effect("gone-1", step.name) == 1, step.name


# --- Every ending is told, whatever is down when it ends (issue 51) ----------------------------


def test_an_order_that_ends_while_the_orders_database_is_down_tells_its_ending_once_it_answers(
    stack: Stack,
) -> None:
    """An order refused at ChargePayment is compensated while the orders database refuses every
    connection: its app and an operator hear at once, and its row gets its final status when
    the database answers (before the outbox, the attempt failed on the row's write, and no one
    was ever told)."""
    app = stack.app
    back: list[datetime] = []

    def script(request: AgentRequest, n: int) -> Answer:
        if request.Step == "ChargePayment":
            return Answer("permanent")
        if request.Step == "RefundPayment" and not back:
            back.append(stack.outage(stack.sql, "refuse", SQL_OUTAGE))  # it ends inside the outage
        return Answer("ok")

    app.agent.script = script
    app.submit(submission("cut-1"))
    app.run_until_terminal("cut-1")
    assert back and app.host.clock.now() < back[0]
    record = stack.states.get("cut-1")
    assert record is not None and record.record.ProcessState is ProcessState.COMPENSATED
    assert record.record.Untold == Notice(OrdersStatus="Cancelled")  # the rest is told
    statuses = [s["Status"] for s in app.statuses("status-app-a") if s["OrderID"] == "cut-1"]
    assert statuses == ["received", "compensated"]
    app.run_until(lambda: app.host.engine.status("cut-1-1")["runtimeStatus"] == "Completed")
    code, text = ops("show", "cut-1")
    assert code == 0 and "its ending not yet told to its orders row" in text, text

    app.run_until(lambda: app.host.clock.now() >= back[0])
    app.run_until(lambda: (s := stack.states.get("cut-1")) is not None and s.record.Untold is None)
    order = pyodbc_orders_repository(stack.orders, POSTGRESQL, POSTGRESQL_SCHEMA).get("cut-1")
    assert order is not None and order.Status == "Cancelled"
    app.settle(timedelta(minutes=5))
    statuses = [s["Status"] for s in app.statuses("status-app-a") if s["OrderID"] == "cut-1"]
    assert statuses == ["received", "compensated"]
    events = sorted(a["Event"] for a in app.alerts())
    assert events == ["DependencyRecovered", "DependencyUnavailable", "OrderCompensated"]
