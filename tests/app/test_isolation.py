"""Isolation between submitting apps (E16): the caller's identity decides what it may submit,
read and hear, never a field it sends. Each hostile case is refused by the running app here;
what only RBAC can refuse (receiving from another app's status queue, sending to the orders or
agent queues) is proven on the Bicep by tests/iac (``submitter`` checks)."""

import base64
import json
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from domain.ids import request_message_id
from domain.messages import AgentOutcome, AgentReply, AgentRequest
from services import frontend
from services.submit_order import conflict_detail
from settings import Settings
from tests.support.app import CLIENT_IDS, App, order_body, submission
from tests.support.scripted_agent import OK, Answer


def call(
    running: App, method: str, path: str, body: str | None = None, **kw: Any
) -> tuple[int, dict[str, Any]]:
    """The status and body; an error's own invocation ID (each call has one, the ID its logs and
    traces carry: tests/app/test_frontend.py checks it) left out, so two answers compare."""
    status, text, _ = running.http(method, path, body, **kw)
    answer: dict[str, Any] = json.loads(text)
    if status >= 400:
        assert answer.pop("invocationId"), answer
    return status, answer


def test_a_caller_without_a_token_is_refused(app: App) -> None:
    assert call(app, "POST", "/api/orders", order_body("x-1"), app=None)[0] == 401
    assert call(app, "GET", "/api/orders/x-1", app=None)[0] == 401
    assert app.bus.counts("orders")["active"] == 0


def test_a_token_of_an_app_that_is_not_registered_is_refused(app: App) -> None:
    status, body = call(app, "POST", "/api/orders", order_body("x-1"), app="app-z")
    assert status == 403 and body["error"] == "NotRegistered"
    assert app.bus.counts("orders")["active"] == 0


def test_the_platform_principal_header_is_no_identity(app: App) -> None:
    """What App Service Authentication would pass (X-MS-CLIENT-PRINCIPAL) says nothing: a client
    can send it itself, so without a verified token the call is refused."""
    principal = {"auth_typ": "aad", "claims": [{"typ": "appid", "val": CLIENT_IDS["app-a"]}]}
    forged = base64.b64encode(json.dumps(principal).encode()).decode()
    status, body = call(
        app, "POST", "/api/orders", order_body("x-1"), headers={"X-MS-CLIENT-PRINCIPAL": forged}
    )
    assert status == 401 and body["error"] == "NotAuthenticated"
    assert app.bus.counts("orders")["active"] == 0


def test_an_app_cannot_send_its_statuses_to_another_apps_queue(app: App) -> None:
    status, body = call(
        app, "POST", "/api/orders", order_body("b-1", StatusQueue="status-app-a"), app="app-b"
    )
    assert status == 403 and body["error"] == "SubmissionRejected"
    app.settle(timedelta(seconds=30))
    assert app.states.get("b-1") is None
    assert app.statuses("status-app-a") == [] and app.statuses("status-app-b") == []


def test_an_app_hears_about_its_own_orders_only_and_may_name_its_own_queue(app: App) -> None:
    assert (
        call(app, "POST", "/api/orders", order_body("b-1", StatusQueue="status-app-b"), app="app-b")[0] == 202
    )
    assert call(app, "POST", "/api/orders", order_body("a-1"), app="app-a")[0] == 202
    app.run_until(lambda: app.terminal("a-1", "b-1") if app.states.get("b-1") else False)
    assert {s["OrderID"] for s in app.statuses("status-app-b")} == {"b-1"}
    assert {s["OrderID"] for s in app.statuses("status-app-a")} == {"a-1"}


def test_an_app_cannot_read_another_apps_order(app: App) -> None:
    assert call(app, "POST", "/api/orders", order_body("a-1"), app="app-a")[0] == 202
    app.run_until_terminal("a-1")
    assert call(app, "GET", "/api/orders/a-1", app="app-a")[0] == 200
    status, body = call(app, "GET", "/api/orders/a-1", app="app-b")
    assert (status, body) == (
        404,
        call(app, "GET", "/api/orders/none", app="app-b")[1] | {"detail": "no order 'a-1'"},
    )


def test_an_app_cannot_take_over_another_apps_order_id(app: App) -> None:
    assert call(app, "POST", "/api/orders", order_body("a-1"), app="app-a")[0] == 202
    app.run_until_terminal("a-1")
    before = app.states.get("a-1")
    status, body = call(app, "POST", "/api/orders", order_body("a-1"), app="app-b")  # the same content
    assert status == 409 and body["error"] == "OrderConflict"
    assert app.states.get("a-1") == before and app.statuses("status-app-b") == []


def test_racing_conflicting_orders_both_reach_the_app_and_the_loser_is_refused_loudly(app: App) -> None:
    """Posted before either is stored, both are queued (their MessageIds differ by content, so
    the broker's duplicate detection cannot drop one); the submission function refuses the
    second: dead-lettered OrderConflict, an operator alert, and ``rejected`` to its submitter."""
    first, second = submission("o-1"), submission("o-1", quantity=9)
    assert first.message_id() != second.message_id()
    app.submit(first)
    app.submit(second)
    app.run_until(lambda: bool(app.dead_letters("orders")) and app.terminal("o-1"))
    [dead] = app.dead_letters("orders")
    # Submissions run concurrently, so either may win; the other is refused, never applied.
    posts = {first.message_id(): first, second.message_id(): second}
    loser = posts.pop(dead.message_id)
    [winner] = posts.values()
    assert dead.dead_letter_reason == "OrderConflict" and loser is not winner
    assert app.record("o-1").OrderHash == winner.order_hash()
    assert [a["Event"] for a in app.alerts()] == ["SubmissionRejected"]
    assert sorted(s["Status"] for s in app.statuses("status-app-a")) == ["completed", "received", "rejected"]


def test_without_the_validators_settings_the_front_end_refuses_everyone() -> None:
    """No tenant or audience: no token can be verified, so none is accepted (not even a valid one)."""
    settings = Settings.from_env({"SAS_SUBMITTERS": f"app-a={CLIENT_IDS['app-a']}"})
    refused = frontend.caller(
        {"Authorization": "Bearer x"},
        SimpleNamespace(settings=settings, tokens=None),  # type: ignore[arg-type]
    )
    assert isinstance(refused, frontend.Reply) and refused.status == 503
    assert refused.body["error"] == "AuthenticationNotConfigured"


@pytest.mark.parametrize("stray_first", [True, False])
def test_stray_replies_do_not_hold_up_or_end_a_step_live(app: App, stray_first: bool) -> None:
    """On devhost: before (or after) the real reply to ReserveInventory, replies to another
    attempt's request and to this attempt's next step arrive. The order finishes in its first
    attempt, without waiting for a timer."""

    def strays(request: AgentRequest) -> None:
        for instance, request_id, step in (
            (request.OrderID + "-0", request_message_id(request.OrderID + "-0", request.Step), request.Step),
            (request.InstanceID, request_message_id(request.InstanceID, "ChargePayment"), "ChargePayment"),
            (request.InstanceID, "ChargePayment:" + "0" * 32, "ChargePayment"),
        ):
            stray = AgentReply(
                RequestID=request_id,
                InstanceID=instance,
                Step=step,
                Outcome=AgentOutcome.OK,
                Result={"Stray": True},
            )
            app.bus.send("agent-replies", stray.model_dump_json(), message_id=f"stray:{request_id}")

    def script(request: AgentRequest, asked: int) -> Answer:
        if request.Step == "ReserveInventory" and stray_first:
            strays(request)
        return OK

    app.agent.script = script
    app.submit(submission("o-1"))
    started = app.host.clock.now()
    app.run_until_terminal("o-1")
    elapsed = app.host.clock.now() - started
    if not stray_first:
        strays(app.agent.requests[0])
        app.settle(timedelta(seconds=30))
    record = app.record("o-1")
    assert record.ProcessState.value == "Processed" and record.Attempt == 1 and record.FailureCount == 0
    assert elapsed < Settings.from_env({}).scheduler_policy.step_timeout  # no timer ended a wait
    assert app.agent.asked["ChargePayment"] == 1


def test_another_apps_order_id_is_refused_in_the_same_words_as_ones_own_taken_id(app: App) -> None:
    """OrderIDs are one namespace: the refusal says the ID cannot be used, and the same whether
    the caller holds it with other data or another app holds it — nothing about that order. On
    the bus path the submitter's ``rejected`` status says the same; the reason with the detail
    goes to the dead letter and the operator."""
    assert call(app, "POST", "/api/orders", order_body("a-1"), app="app-a")[0] == 202
    app.run_until_terminal("a-1")
    foreign = call(app, "POST", "/api/orders", order_body("a-1"), app="app-b")
    own = call(app, "POST", "/api/orders", order_body("a-1", Customer="Fabrikam"), app="app-a")
    assert foreign == own == (409, {"error": "OrderConflict", "detail": conflict_detail("a-1")})
    assert "different" not in foreign[1]["detail"]
    app.submit(submission("a-1", app="app-b"))
    app.run_until(lambda: bool(app.dead_letters("orders")))
    [told] = app.statuses("status-app-b")
    assert (told["Status"], told["Detail"]) == ("rejected", f"OrderConflict: {conflict_detail('a-1')}")
    [dead] = app.dead_letters("orders")
    assert "different data" in (dead.dead_letter_error_description or "")  # for the operator
