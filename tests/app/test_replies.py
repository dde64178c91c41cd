"""A reply answers only the request that was sent (issue 24), live on devhost: the real
function_app.py, the scripted agent, virtual time.

Forged and stray replies go onto ``agent-replies`` the way a faulty or compromised sender would
put them there. A reply with a well-formed ID that answers no request in flight is raised and
stays inert; one with an ID outside its alphabet is dead-lettered with a reason and an operator
alert, never raised. The agent's effects ledger shows each effect once, and net zero after
compensation.
"""

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from domain.ids import request_id, request_message_id
from domain.messages import AgentOutcome, AgentReply, AgentRequest
from domain.states import ProcessState
from services import operator
from settings import Settings
from tests.support.app import App, submission
from tests.support.scripted_agent import OK, Answer, Script

SILENT = Answer("silent")
STEP_TIMEOUT = Settings.from_env({}).scheduler_policy.step_timeout

# A reply nobody waits for is buffered by the Durable SDK, which warns: here that is the point.
pytestmark = pytest.mark.filterwarnings("ignore:Potential duplicate Task completion:UserWarning")


def forge(app: App, body: dict[str, Any], message_id: str) -> None:
    """Put ``body`` on the reply queue as any sender to it could."""
    app.bus.send("agent-replies", json.dumps(body), message_id=message_id)


def reply_body(
    rid: str, instance: str, step: str, outcome: AgentOutcome = AgentOutcome.OK, **result: str
) -> dict[str, Any]:
    error = None if outcome is AgentOutcome.OK else f"{step} refused (forged)"
    reply = AgentReply(
        RequestID=rid, InstanceID=instance, Step=step, Outcome=outcome, Result=result or None, Error=error
    )
    return json.loads(reply.model_dump_json())


def before(step: str, then: Callable[[AgentRequest], None], answer: Script | None = None) -> Script:
    """A script: ``then(request)`` when ``step`` is first asked, before the agent answers it."""

    def script(request: AgentRequest, asked: int) -> Answer:
        if request.Step == step and asked == 1:
            then(request)
        return OK if answer is None else answer(request, asked)

    return script


def took_effect_but_said(app: App, outcome: AgentOutcome) -> Callable[[AgentRequest], None]:
    """The remote acted, and the Agent reported ``outcome`` anyway: an ambiguous reply."""

    def act(request: AgentRequest) -> None:
        app.agent.calls[request.IdempotencyKey] += 1
        app.agent.effects[request.IdempotencyKey] = 1
        forge(
            app,
            reply_body(request.RequestID, request.InstanceID, request.Step, outcome),
            f"{request.RequestID}:r",
        )

    return act


def charge_reference(app: App, order_id: str) -> dict[str, str]:
    [entry] = [e for e in app.compensation_log.entries(order_id) if e.Step == "ChargePayment"]
    return entry.Data


def assert_done_once(app: App, order_id: str) -> None:
    record = app.record(order_id)
    assert record.ProcessState is ProcessState.PROCESSED
    assert record.Attempt == 1 and record.FailureCount == 0
    for action in ("ReserveInventory", "ChargePayment"):
        assert app.agent.net_effect(order_id, action) == 1
    for undo in ("ReleaseInventory", "RefundPayment"):
        assert app.agent.net_effect(order_id, undo) == 0
    # Not terminated, not ended early: the attempt ran to its end (shortly after the record's).
    instance = f"{order_id}-1"
    app.run_until(lambda: app.host.engine.status(instance)["runtimeStatus"] == "Completed")
    assert app.host.engine.status(instance)["output"] == "processed"


def test_a_reply_for_a_step_not_yet_begun_cannot_answer_it_live(app: App) -> None:
    """The live finding: while ReserveInventory is awaited, replies for ChargePayment arrive —
    refusals (which compensated Reserve only, and then the agent charged anyway) and an ok with
    a made-up PaymentId. None of them answers the real ChargePayment request."""

    def forge_charge_replies(request: AgentRequest) -> None:
        instance = request.InstanceID
        for n, rid in enumerate(
            (
                request_message_id(instance, "ChargePayment"),  # the ID a request had before nonces
                request_id("ChargePayment", "0" * 32),
                request_id("ChargePayment", request.RequestID.split(":")[1]),  # Reserve's own nonce
            )
        ):
            refusal = reply_body(rid, instance, "ChargePayment", AgentOutcome.PERMANENT)
            forge(app, refusal, f"forged-{n}")
            forge(app, reply_body(rid, instance, "ChargePayment", ChargePaymentId="forged"), f"forged-ok-{n}")

    app.agent.script = before("ReserveInventory", forge_charge_replies)
    app.submit(submission("o-1"))
    started = app.host.clock.now()
    app.run_until_terminal("o-1")
    assert app.host.clock.now() - started < STEP_TIMEOUT  # no timer ended a wait
    assert_done_once(app, "o-1")
    assert charge_reference(app, "o-1") == {"ChargePaymentId": "ref-o-1:ChargePayment"}  # the real one
    assert app.dead_letters("agent-replies") == []  # well-formed, so raised, and inert
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "completed"]


def test_hostile_ids_are_dead_lettered_with_a_reason_and_an_alert_never_raised_live(app: App) -> None:
    """IDs that would reach the Durable API's URL (terminate, another event, another instance),
    the "."-for-":" twin of the live RequestID, unicode and oversize IDs: each reply is
    dead-lettered and alerted; the attempt runs on untouched."""
    sent: list[str] = []

    def forge_hostile(request: AgentRequest) -> None:
        live, instance, step = request.RequestID, request.InstanceID, request.Step
        hostile = [
            (live, f"{instance}/terminate?reason=forged&x=-1", step),
            (live, f"{instance}/raiseEvent/AgentReply.x?x=-1", step),
            (live, f"{instance}%2F..%2Fterminate-1", step),
            (live, "ö-1", step),
            (live, "o" * 300 + "-1", step),
            ("x/../../terminate?reason=forged", instance, step),
            (f"{live}/../../terminate?reason=forged", instance, step),
            (f"{live}?x=1", instance, step),
            (live.replace(":", "%3A"), instance, step),
            (live.replace(":", "."), instance, step),  # the "."-for-":" twin
            (f"{instance}.{step}", instance, step),  # the legacy ID's twin
            (f"{live}é", instance, step),
            (step + ":" + "a" * 3000, instance, step),
            (live, instance, "ChargePayment"),  # an ID for another action than the reply's
        ]
        for n, (rid, target, named) in enumerate(hostile):
            body = {"RequestID": rid, "InstanceID": target, "Step": named, "Outcome": "permanent"}
            forge(app, body | {"Error": "forged", "Attempts": 1}, f"hostile-{n}")
            sent.append(f"hostile-{n}")

    app.agent.script = before("ReserveInventory", forge_hostile)
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    app.settle(timedelta(seconds=30))
    assert_done_once(app, "o-1")
    dead = {m.message_id: m for m in app.dead_letters("agent-replies")}
    assert sorted(dead) == sorted(sent)
    for message in dead.values():
        assert message.dead_letter_reason == "InvalidSchema"
        assert "RequestID" in (message.dead_letter_error_description or "") or "InstanceID" in (
            message.dead_letter_error_description or ""
        )
    rejected = [a for a in app.alerts() if a["Event"] == "MessageRejected"]
    assert len(rejected) == len(sent)
    assert all("agent-replies message hostile-" in a["Reason"] for a in rejected)


def test_a_reply_that_is_not_utf8_is_dead_lettered_with_a_reason_and_one_alert_live(app: App) -> None:
    """A refusal for the live request whose Error is not UTF-8: read lossily it would be a valid
    reply and fail the step; the app dead-letters it at its first delivery, alerts once, and the
    attempt runs on untouched."""

    def forge_undecodable(request: AgentRequest) -> None:
        body = reply_body(request.RequestID, request.InstanceID, request.Step, AgentOutcome.PERMANENT)
        raw = json.dumps(body).encode().replace(b"refused (forged)", b"refused \xe9")
        app.bus.send("agent-replies", raw, message_id="latin-1-reply")

    app.agent.script = before("ReserveInventory", forge_undecodable)
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    app.settle(timedelta(seconds=30))
    assert_done_once(app, "o-1")
    [dead] = app.dead_letters("agent-replies")
    assert (dead.message_id, dead.dead_letter_reason, dead.delivery_count) == (
        "latin-1-reply",
        "InvalidEncoding",
        1,
    )
    assert "not UTF-8" in (dead.dead_letter_error_description or "")
    [alert] = app.alerts()
    assert alert["Event"] == "MessageRejected"
    assert alert["Reason"].startswith("InvalidEncoding on agent-replies message latin-1-reply: ")


def test_a_reply_for_a_previous_attempt_is_inert_live(app: App) -> None:
    """Attempt 1's ChargePayment went unanswered and the Supervisor started attempt 2. Attempt
    1's refusal of it, arriving now (at either instance), neither fails nor answers attempt 2."""

    def charge(request: AgentRequest, asked: int) -> Answer:
        if request.Step != "ChargePayment":
            return OK
        if asked == 1:
            return SILENT
        first = next(r for r in app.agent.requests if r.Step == "ChargePayment")
        for instance in (first.InstanceID, request.InstanceID):
            refusal = reply_body(first.RequestID, instance, "ChargePayment", AgentOutcome.PERMANENT)
            forge(app, refusal, f"old-{instance}")
        return OK

    app.agent.script = charge
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.PROCESSED and record.Attempt == 2
    assert [(r.InstanceID, r.Step) for r in app.agent.requests] == [
        ("o-1-1", "ReserveInventory"),
        ("o-1-1", "ChargePayment"),
        ("o-1-2", "ChargePayment"),
    ]
    old, new = (r.RequestID for r in app.agent.requests[1:])
    assert old != new  # each attempt's request has its own nonce; the MessageIds name the attempt
    assert app.agent.net_effect("o-1", "ChargePayment") == 1
    assert app.agent.net_effect("o-1", "RefundPayment") == 0
    assert app.dead_letters("agent-replies") == []


def test_a_refused_step_whose_remote_acted_is_undone_with_the_rest_net_zero_live(app: App) -> None:
    """ChargePayment took effect and the Agent reported a refusal: compensation undoes it too
    (newest first), not ReserveInventory alone."""
    charged = took_effect_but_said(app, AgentOutcome.PERMANENT)
    app.agent.script = before(
        "ChargePayment", charged, lambda r, n: SILENT if r.Step == "ChargePayment" else OK
    )
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.COMPENSATED and record.Attempt == 1
    assert record.CompensatedSteps == ("ChargePayment", "ReserveInventory")
    assert [r.Step for r in app.agent.requests] == [
        "ReserveInventory",
        "ChargePayment",
        "RefundPayment",
        "ReleaseInventory",
    ]
    for done, undo in (("ReserveInventory", "ReleaseInventory"), ("ChargePayment", "RefundPayment")):
        assert app.agent.net_effect("o-1", done) == app.agent.net_effect("o-1", undo) == 1
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "compensated"]


def test_a_refused_first_agent_step_is_undone_too_live(app: App) -> None:
    """Nothing completed, but ReserveInventory's request went out: the order is compensated
    (its undo is idempotent: a no-op where the remote did nothing), not left in Error."""
    app.agent.script = lambda request, asked: (
        Answer("permanent") if request.Step == "ReserveInventory" else OK
    )
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.COMPENSATED
    assert record.CompletedSteps == ("ValidateOrder",) and record.CompensatedSteps == ("ReserveInventory",)
    assert [r.Step for r in app.agent.requests] == ["ReserveInventory", "ReleaseInventory"]
    assert app.agent.net_effect("o-1", "ChargePayment") == 0
    assert [a["Event"] for a in app.alerts()] == ["OrderCompensated"]


def test_after_the_supervisor_gives_up_an_operators_compensation_undoes_the_unanswered_step_live(
    app: App,
) -> None:
    """ChargePayment took effect and no reply ever came: the Supervisor gives up (Error, an
    alert; nothing is undone by itself, C12). The operator's compensation then undoes
    ChargePayment too, though it was never recorded done: net zero."""

    def charge_silently(request: AgentRequest, asked: int) -> Answer:
        if request.Step == "ChargePayment":
            app.agent.effects[request.IdempotencyKey] = 1
            return SILENT
        return OK

    app.agent.script = charge_silently
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.ERROR and record.FailedStep == "ChargePayment"
    assert app.agent.net_effect("o-1", "RefundPayment") == 0  # nothing undone by itself
    operator.request_compensation(app.states, app.host.clock, "o-1")
    app.run_until_terminal("o-1")
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.COMPENSATED
    assert record.CompensatedSteps == ("ChargePayment", "ReserveInventory")
    for done, undo in (("ReserveInventory", "ReleaseInventory"), ("ChargePayment", "RefundPayment")):
        assert app.agent.net_effect("o-1", done) == app.agent.net_effect("o-1", undo) == 1
