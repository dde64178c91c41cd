"""Every ending is told (the outbox, ``domain.endings``): an order that ends while what it must
tell is unreachable, or whose worker dies between its final write and the telling, still tells
its app exactly one final status, raises one operator alert and gives its orders row its final
status, once the dependency is back. (The orders database's outage, with real connection faults,
is in tests/app/test_outages.py.)"""

import asyncio
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from domain.dependencies import SERVICE_BUS
from domain.endings import Notice
from domain.errors import DependencyUnavailable
from domain.messages import AgentRequest
from domain.states import OrderStatus, ProcessState
from harness.devhost.worker_processes import WorkerProcesses
from tests.support.app import App, start_app, submission
from tests.support.scripted_agent import OK, Answer

OUTAGE = timedelta(minutes=10)  # past the orchestrator's activity retries (about a minute)


def _fail_then_compensate(request: AgentRequest, n: int) -> Answer:
    """ChargePayment is refused: both forward steps are undone, and the order ends Compensated."""
    return Answer("permanent") if request.Step == "ChargePayment" else OK


def _told_once(app: App, order_id: str) -> None:
    """The app heard one final status, an operator one alert, and the orders row has its final
    status; nothing is left in the record's outbox."""
    statuses = [s["Status"] for s in app.statuses("status-app-a") if s["OrderID"] == order_id]
    assert statuses == ["received", "compensated"]
    alerts = [a["Event"] for a in app.alerts() if a["OrderID"] == order_id]
    assert alerts == ["OrderCompensated"]
    order = app.ports().orders.get(order_id)
    assert order is not None and order.Status == "Cancelled"
    assert app.record(order_id).Untold is None


class StatusQueueDown:
    """Fault injection: Service Bus refuses every send to the status queues and the alerts queue
    until ``until``, as the app's guarded sender reports it after its retry budget."""

    def __init__(self, inner: Any, app: App) -> None:
        self.inner, self.app = inner, app
        self.until: datetime | None = None
        self.refused = 0

    def send(self, queue: str, body: str, **kwargs: Any) -> Any:
        down = self.until is not None and self.app.host.clock.now() < self.until
        if down and (queue.startswith("status-") or queue == "operator-alerts"):
            self.refused += 1
            raise DependencyUnavailable(SERVICE_BUS, f"injected: {queue} refuses sends")
        return self.inner.send(queue, body, **kwargs)


def test_an_ending_during_a_status_queue_outage_is_told_once_when_it_returns(app_in_process: App) -> None:
    app = app_in_process
    function_app = sys.modules["function_app"]
    real = function_app.ports()
    sender = StatusQueueDown(real.sender, app)
    function_app.ports = lambda: replace(real, sender=sender)

    def script(request: AgentRequest, n: int) -> Answer:
        if request.Step == "ChargePayment" and sender.until is None:
            sender.until = app.host.clock.now() + OUTAGE  # the order ends inside the outage
        return _fail_then_compensate(request, n)

    app.agent.script = script
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")

    # Ended while the queues refuse: the orders row is told, the rest waits on the record.
    assert sender.until is not None and app.host.clock.now() < sender.until
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.COMPENSATED
    assert record.Untold == Notice(Status=OrderStatus.COMPENSATED, Alert="OrderCompensated")
    order = app.ports().orders.get("o-1")
    assert order is not None and order.Status == "Cancelled"
    # The attempt itself ended well: what it could not tell is not its failure.
    app.run_until(lambda: app.host.engine.status("o-1-1")["runtimeStatus"] == "Completed")
    assert app.host.engine.status("o-1-1")["output"] == "compensated"

    # Service Bus answers again: the Supervisor's sweep tells what waited, once.
    app.run_until(lambda: app.record("o-1").Untold is None)
    assert app.host.clock.now() >= sender.until
    assert sender.refused >= 2  # the finishing activity tried, and the sweep while still down
    app.settle(timedelta(minutes=5))
    _told_once(app, "o-1")


@pytest.fixture
def app_in_workers(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[App]:
    running = start_app(loop, tmp_path, monkeypatch)
    yield running
    running.stop()


def test_a_worker_killed_between_an_ending_and_its_telling_tells_it_once(
    app_in_workers: App, tmp_path: Path
) -> None:
    app = app_in_workers
    workers = app.host.worker
    assert isinstance(workers, WorkerProcesses)
    # The worker's write to the orders database waits on this lock, taken once the order runs
    # its last compensation: its ending is written, its telling held where the kill finds it.
    # The host waits for the invocation, so the watcher that kills runs beside it, on a thread.
    locked: list[sqlite3.Connection] = []
    seen: list[Notice | None] = []

    def script(request: AgentRequest, n: int) -> Answer:
        if request.Step == "ReleaseInventory" and not locked:
            orders_db = sqlite3.connect(
                tmp_path / "data" / "orders.db", isolation_level=None, check_same_thread=False
            )
            orders_db.execute("BEGIN EXCLUSIVE")
            locked.append(orders_db)
        return _fail_then_compensate(request, n)

    def kill_once_ended() -> None:
        states = app.ports().states
        while not app.terminal("o-1"):
            threading.Event().wait(0.005)  # polling the store: nothing to wait on across processes
        stored = states.get("o-1")
        seen.append(None if stored is None else stored.record.Untold)
        [pid] = workers.pids
        os.kill(pid, signal.SIGKILL)  # mid-telling: blocked on the orders row's status
        locked[0].rollback()

    watcher = threading.Thread(target=kill_once_ended, daemon=True)
    app.agent.script = script
    app.submit(submission("o-1"))
    watcher.start()
    try:
        app.run_until(lambda: workers.restarts == 1)
    finally:
        watcher.join(timeout=60)
        for orders_db in locked:
            orders_db.close()
    # What the kill interrupted: the ending written, nothing of it told yet.
    assert seen == [Notice("Cancelled", OrderStatus.COMPENSATED, "OrderCompensated")]
    app.run_until(lambda: app.record("o-1").Untold is None)
    app.settle(timedelta(minutes=5))
    _told_once(app, "o-1")
