"""The app under faults (C1): a silent agent, duplicated and late replies, fencing, permanent
failures, failing compensations, repeated expiries, operator resubmission."""

import sys
from dataclasses import replace
from datetime import timedelta

import pytest

from activities import functions as steps
from domain.messages import AgentRequest
from domain.states import ProcessState
from services import operator
from tests.support.app import App, submission
from tests.support.scripted_agent import OK, Answer

SILENT = Answer("silent")


def on(action: str, answer: Answer, times: int = 1):  # type: ignore[no-untyped-def]
    """A script: ``answer`` for the first ``times`` requests of ``action``, then ok."""

    def script(request: AgentRequest, n: int) -> Answer:
        return answer if request.Step == action and n <= times else OK

    return script


def test_a_silent_agent_is_recovered_by_the_supervisor_with_a_new_attempt(app: App) -> None:
    app.agent.script = on("ChargePayment", SILENT)
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.PROCESSED
    assert record.Attempt == 2 and record.FailureCount == 1
    asked = [(r.InstanceID, r.Step) for r in app.agent.requests]
    # Attempt 2 resumes after the step attempt 1 completed (R1).
    assert asked == [("o-1-1", "ReserveInventory"), ("o-1-1", "ChargePayment"), ("o-1-2", "ChargePayment")]
    # The idempotency key is stable across attempts (R3): one effect per step.
    assert {r.IdempotencyKey for r in app.agent.requests if r.Step == "ChargePayment"} == {
        "o-1:ChargePayment"
    }
    assert app.agent.net_effect("o-1", "ChargePayment") == 1
    assert app.host.engine.status("o-1-1")["output"] == "timed-out"  # ended without touching the record


@pytest.mark.filterwarnings("ignore:Potential duplicate Task completion:UserWarning")
def test_a_duplicated_reply_changes_nothing(app: App) -> None:
    app.agent.script = lambda request, n: Answer("ok", copies=2)
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    app.settle(timedelta(minutes=5))
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.PROCESSED and record.Attempt == 1
    assert record.FailureCount == 0
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "completed"]


def test_a_late_reply_after_the_timer_is_ignored(app: App) -> None:
    app.agent.script = on("ReserveInventory", Answer("ok", delay=timedelta(minutes=3)))
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    app.settle(timedelta(minutes=5))  # the late reply for attempt 1 arrives in here
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.PROCESSED and record.Attempt == 2
    assert app.bus.counts("agent-replies") == {"active": 0, "scheduled": 0, "locked": 0, "dead_letter": 0}
    assert app.host.engine.status("o-1-1")["output"] == "timed-out"


def test_the_old_attempt_is_fenced_out_of_its_replacements_record(app: App) -> None:
    app.agent.script = on("ChargePayment", SILENT)
    app.submit(submission("o-1"))
    app.run_until(
        lambda: app.terminal("o-1") or (app.states.get("o-1") is not None and app.record("o-1").Attempt == 2)
    )
    before = app.states.get("o-1")
    ports = app.ports()
    old = {"OrderID": "o-1", "InstanceID": "o-1-1", "Step": "ChargePayment", "Action": "ChargePayment"}
    assert steps.begin_step(old, ports) == {"Fenced": True}
    assert steps.record_step({**old, "Result": {}}, ports) == {"Fenced": True}
    assert steps.finish({**old, "Outcome": "complete"}, ports) == {"Fenced": True}
    assert steps.finish({**old, "Outcome": "fail", "Error": "x"}, ports) == {"Fenced": True}
    assert app.states.get("o-1") == before  # not a single field changed
    app.run_until_terminal("o-1")
    assert app.record("o-1").ProcessState is ProcessState.PROCESSED


def test_a_permanent_failure_is_compensated_newest_first(app: App) -> None:
    """The refused step is undone too: its request went out, so the remote may have acted."""
    app.agent.script = on("ChargePayment", Answer("permanent"))
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.COMPENSATED
    assert record.CompletedSteps == ("ValidateOrder", "ReserveInventory")
    assert record.CompensatedSteps == ("ChargePayment", "ReserveInventory")
    actions = [r.Step for r in app.agent.requests]
    assert actions == ["ReserveInventory", "ChargePayment", "RefundPayment", "ReleaseInventory"]
    assert app.agent.net_effect("o-1", "ReleaseInventory") == 1
    charge, reserve = app.compensation_log.entries("o-1")
    assert (charge.Step, charge.Action, charge.Outcome, charge.Data) == (
        "ChargePayment",
        "RefundPayment",
        "Compensated",
        {},  # refused: no reference to undo by, only the idempotency key
    )
    assert (reserve.Step, reserve.Action, reserve.Outcome) == (
        "ReserveInventory",
        "ReleaseInventory",
        "Compensated",
    )
    assert reserve.Data == {"ReserveInventoryId": "ref-o-1:ReserveInventory"}
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "compensated"]
    assert [a["Event"] for a in app.alerts()] == ["OrderCompensated"]


def test_two_completed_steps_are_undone_in_reverse_order(app: App) -> None:
    app.submit(submission("o-1", sku="BACKORDER-1"))  # fails at ConfirmOrder, after payment
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.COMPENSATED
    assert record.CompensatedSteps == ("ChargePayment", "ReserveInventory")
    actions = [r.Step for r in app.agent.requests]
    assert actions == ["ReserveInventory", "ChargePayment", "RefundPayment", "ReleaseInventory"]
    entries = app.compensation_log.entries("o-1")
    assert [(e.Step, e.Outcome) for e in entries] == [
        ("ChargePayment", "Compensated"),
        ("ReserveInventory", "Compensated"),
    ]
    for action in ("ReserveInventory", "ChargePayment", "RefundPayment", "ReleaseInventory"):
        assert app.agent.net_effect("o-1", action) == 1


def test_a_failure_with_nothing_to_undo_ends_in_error_with_an_alert(app: App) -> None:
    app.submit(submission("o-1", sku="BLOCKED-1"))  # fails validation, the first step
    app.run_until_terminal("o-1")
    assert app.record("o-1").ProcessState is ProcessState.ERROR
    assert app.agent.requests == []
    assert [a["Event"] for a in app.alerts()] == ["OrderFailed"]
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "failed"]


def test_a_failing_compensation_ends_in_compensation_failed_with_an_alert(app: App) -> None:
    def script(request: AgentRequest, n: int) -> Answer:
        if request.Step in ("ChargePayment", "ReleaseInventory"):
            return Answer("permanent")
        return OK

    app.agent.script = script
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.COMPENSATION_FAILED
    assert "ReleaseInventory" in (record.LastError or "")
    assert [a["Event"] for a in app.alerts()] == ["CompensationFailed"]
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "compensation-failed"]


def test_repeated_expiries_cool_down_then_end_in_error_with_an_alert(app: App) -> None:
    app.agent.script = on("ReserveInventory", SILENT, times=100)
    app.submit(submission("o-1"))
    started = app.host.clock.now()
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.ERROR
    assert record.FailureCount == 5 and record.Attempt == 5  # 1 + 2 quick + 2 after cool-downs
    assert record.FailedStep == "ReserveInventory"
    assert app.host.clock.now() - started > 2 * timedelta(seconds=300)  # two cool-downs waited out
    assert [a["Event"] for a in app.alerts()] == ["RecoveryGaveUp"]
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "failed"]


def test_operator_resubmit_of_an_error_order_ends_processed(app: App) -> None:
    app.agent.script = on("ReserveInventory", SILENT, times=5)
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    assert app.record("o-1").ProcessState is ProcessState.ERROR
    operator.resubmit(app.states, app.host.clock, "o-1")
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.PROCESSED
    assert record.Attempt == 6
    assert app.agent.net_effect("o-1", "ReserveInventory") == 1


class FailingOnce:
    """Fault injection: the first status message for ``status`` fails to send."""

    def __init__(self, inner, status: str) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.status, self.failed = inner, status, False

    def send(self, queue: str, body: str, **kwargs):  # type: ignore[no-untyped-def]
        if queue.startswith("status-") and f'"Status":"{self.status}"' in body and not self.failed:
            self.failed = True
            raise ConnectionError("injected: the broker dropped the connection")
        return self.inner.send(queue, body, **kwargs)


def test_a_status_lost_after_the_final_write_is_sent_from_the_outbox(app_in_process: App) -> None:
    app = app_in_process
    function_app = sys.modules["function_app"]
    real = function_app.ports()
    sender = FailingOnce(real.sender, "completed")
    function_app.ports = lambda: replace(real, sender=sender)
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    app.run_until(lambda: app.host.engine.status("o-1-1")["runtimeStatus"] == "Completed")
    assert sender.failed
    app.run_until(lambda: app.record("o-1").Untold is None)  # the Supervisor's sweep told it
    assert app.record("o-1").ProcessState is ProcessState.PROCESSED
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "completed"]
    assert app.host.engine.status("o-1-1")["output"] == "processed"


def test_a_stuck_compensation_is_driven_again_by_the_supervisor(app: App) -> None:
    def script(request: AgentRequest, n: int) -> Answer:
        if request.Step == "ChargePayment":
            return Answer("permanent")
        if request.Step == "ReleaseInventory" and n == 1:
            return SILENT
        return OK

    app.agent.script = script
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.COMPENSATED
    assert record.Attempt == 2 and record.FailureCount == 1
    assert [(r.InstanceID, r.Step) for r in app.agent.requests][-2:] == [
        ("o-1-1", "ReleaseInventory"),
        ("o-1-2", "ReleaseInventory"),
    ]
    assert app.agent.net_effect("o-1", "ReleaseInventory") == 1


def test_only_the_lease_holder_supervises(app: App) -> None:
    """R10: a Supervisor that does not hold the lease leaves expired work to the one that does."""
    ports = app.ports()
    assert ports.leader.acquire("another-supervisor")  # someone else leads, and keeps renewing
    app.agent.script = on("ReserveInventory", SILENT)
    app.submit(submission("o-1"))
    app.run_until(
        lambda: app.states.get("o-1") is not None and app.record("o-1").CurrentStep == "ReserveInventory"
    )
    for _ in range(3):  # the other leader renews every 20 s; 60 s pass, well past CompleteBy
        app.settle(timedelta(seconds=20))
        assert ports.leader.acquire("another-supervisor")
    record = app.record("o-1")
    assert record.CompleteBy is not None and record.CompleteBy < app.host.clock.now()
    assert record.ProcessState is ProcessState.PROCESSING and record.FailureCount == 0
    ports.leader.release("another-supervisor")  # the other one stops
    app.run_until_terminal("o-1")
    assert app.record("o-1").FailureCount == 1  # now this app's Supervisor recovered it
