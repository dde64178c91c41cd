"""The whole app on devhost: submission → claim and start → orchestration → agent → Processed."""

from datetime import timedelta

from domain.states import ProcessState
from tests.support.app import App, start_app, submission
from tests.support.scripted_agent import OK, Answer


def test_an_order_is_processed_end_to_end(app: App) -> None:
    app.submit(submission("order-1"))
    app.run_until_terminal("order-1")
    record = app.record("order-1")
    assert record.ProcessState is ProcessState.PROCESSED
    assert record.CompletedSteps == ("ValidateOrder", "ReserveInventory", "ChargePayment", "ConfirmOrder")
    assert record.Attempt == 1 and record.FailureCount == 0 and record.LockedBy is None
    assert app.agent.net_effect("order-1", "ReserveInventory") == 1
    assert app.agent.net_effect("order-1", "ChargePayment") == 1
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "completed"]
    assert app.alerts() == []


def test_a_new_order_starts_at_once_without_waiting_for_the_starter(loop, tmp_path, monkeypatch) -> None:
    """The submission function claims and starts the first attempt itself: with the starter's
    timer an hour away, the order still completes within seconds of virtual time."""
    app = start_app(loop, tmp_path, monkeypatch, settings={"SAS_STARTER_SCHEDULE": "0 0 * * * *"})
    try:
        started = app.host.clock.now()
        app.submit(submission("order-1"))
        app.run_until_terminal("order-1")
        assert app.record("order-1").ProcessState is ProcessState.PROCESSED
        assert app.host.clock.now() - started < timedelta(seconds=5)
        assert app.host.invocations_by_function["starter"] == 0
    finally:
        app.stop()


def test_an_order_over_the_in_flight_cap_waits_for_the_freed_slot(loop, tmp_path, monkeypatch) -> None:
    """The cap holds on the submission path too; the attempt that ends starts what it left
    Pending, with the starter's timer an hour away."""
    settings = {"SAS_MAX_IN_FLIGHT": "1", "SAS_STARTER_SCHEDULE": "0 0 * * * *"}
    app = start_app(loop, tmp_path, monkeypatch, settings=settings)
    try:
        app.agent.script = lambda request, asked: Answer("ok", delay=timedelta(seconds=3))
        app.submit(submission("order-1"))
        app.run_until(lambda: app.states.get("order-1") is not None)
        app.submit(submission("order-2"))
        app.run_until(lambda: app.states.get("order-2") is not None)
        assert app.record("order-2").ProcessState is ProcessState.PENDING
        app.run_until_terminal("order-1", "order-2")
        assert app.record("order-2").Attempt == 1 and app.host.invocations_by_function["starter"] == 0
    finally:
        app.stop()


def test_a_record_the_supervisor_resets_starts_its_next_attempt_at_once(loop, tmp_path, monkeypatch) -> None:
    """The first ReserveInventory request goes unanswered: the attempt times out at CompleteBy,
    the Supervisor sends the record back to Pending and starts the next attempt itself, so the
    order finishes within one Supervisor period of the deadline, with the starter an hour away."""
    app = start_app(loop, tmp_path, monkeypatch, settings={"SAS_STARTER_SCHEDULE": "0 0 * * * *"})
    try:
        first_reserve = ("ReserveInventory", 1)
        app.agent.script = lambda r, asked: Answer("silent") if (r.Step, asked) == first_reserve else OK
        started = app.host.clock.now()
        app.submit(submission("order-1"))
        app.run_until_terminal("order-1")
        record = app.record("order-1")
        assert record.ProcessState is ProcessState.PROCESSED and record.Attempt == 2
        step_timeout, supervisor_period = timedelta(seconds=30), timedelta(seconds=10)
        assert app.host.clock.now() - started <= step_timeout + supervisor_period + timedelta(seconds=5)
        assert app.host.invocations_by_function["starter"] == 0
    finally:
        app.stop()
