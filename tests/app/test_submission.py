"""Submission (E1-E2, E16, C6): idempotent, conflicts and bad messages dead-lettered with a
reason and an alert, status only on the submitter's own queue."""

import json
import sys
from dataclasses import replace
from datetime import timedelta

from domain.states import ProcessState
from tests.support.app import App, submission


def test_the_same_order_submitted_twice_is_one_order(app: App) -> None:
    app.submit(submission("o-1"), message_id="first-send")
    app.submit(submission("o-1"), message_id="client-retry")  # a new MessageId: not a broker duplicate
    app.run_until_terminal("o-1")
    app.settle(timedelta(minutes=1))
    record = app.record("o-1")
    assert record.ProcessState is ProcessState.PROCESSED and record.Attempt == 1
    assert app.agent.calls["o-1:ChargePayment"] == 1
    assert app.dead_letters("orders") == [] and app.alerts() == []
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "completed"]


def test_conflicting_data_is_dead_lettered_with_a_reason_and_changes_nothing(app: App) -> None:
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    before = app.states.get("o-1")
    order_before = app.ports().orders.get("o-1")
    app.submit(submission("o-1", quantity=9), message_id="o-1-other")
    app.run_until(lambda: bool(app.dead_letters("orders")))
    [dead] = app.dead_letters("orders")
    assert dead.message_id == "o-1-other"
    assert dead.dead_letter_reason == "OrderConflict"
    assert "different data" in (dead.dead_letter_error_description or "")
    assert [a["Event"] for a in app.alerts()] == ["SubmissionRejected"]
    # The submitter hears of it too, on its own queue (E16): a conflict is never silent.
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "completed", "rejected"]
    assert "OrderConflict" in app.statuses("status-app-a")[-1]["Detail"]
    assert app.states.get("o-1") == before
    assert app.ports().orders.get("o-1") == order_before


def test_an_invalid_message_is_dead_lettered_with_the_schema_error(app: App) -> None:
    body = json.loads(submission("o-1").model_dump_json())
    body["OrderID"] = "../etc/passwd"
    app.send_raw(json.dumps(body), "hostile")
    app.send_raw("{not json", "garbage")
    app.run_until(lambda: len(app.dead_letters("orders")) == 2)
    reasons = {
        d.message_id: (d.dead_letter_reason, d.dead_letter_error_description)
        for d in app.dead_letters("orders")
    }
    assert reasons["hostile"][0] == "InvalidSchema" and "OrderID" in (reasons["hostile"][1] or "")
    assert reasons["garbage"][0] == "InvalidSchema"
    assert len(app.alerts()) == 2
    assert app.states.get("../etc/passwd") is None


def test_a_body_that_is_not_utf8_is_dead_lettered_by_the_app_with_one_alert(app: App) -> None:
    """An order whose bytes are not UTF-8 (the host would read its text lossily, U+FFFD for each bad
    byte, and a Customer of "Ann \\ufffd" would pass the schema) and bytes that are no text at all:
    each dead-lettered at its first delivery by the app, with the reason and one alert, never acted on."""
    order = submission("o-1").model_dump_json().encode().replace(b'"Contoso"', b'"Ann \xff"')
    app.bus.send("orders", order, message_id="latin-1")
    app.bus.send("orders", b"\xff\xfe\x00{", message_id="binary")
    app.run_until(lambda: len(app.dead_letters("orders")) == 2)
    dead = {d.message_id: d for d in app.dead_letters("orders")}
    for message_id in ("latin-1", "binary"):
        assert dead[message_id].dead_letter_reason == "InvalidEncoding"
        assert "not UTF-8" in (dead[message_id].dead_letter_error_description or "")
        assert dead[message_id].delivery_count == 1  # the app's own dead letter, not the broker's
    assert "byte 0xff at offset 33" in (dead["latin-1"].dead_letter_error_description or "")
    alerts = app.alerts()
    assert sorted(a["Reason"].split(":")[0] for a in alerts) == [
        "InvalidEncoding on orders message binary",
        "InvalidEncoding on orders message latin-1",
    ]
    assert {a["Event"] for a in alerts} == {"SubmissionRejected"}
    assert app.states.get("o-1") is None and app.ports().orders.get("o-1") is None


def test_an_order_from_an_app_that_is_not_registered_is_refused(app: App) -> None:
    app.submit(submission("o-1", app="app-z"))
    app.run_until(lambda: bool(app.dead_letters("orders")))
    [dead] = app.dead_letters("orders")
    assert dead.dead_letter_reason == "SubmissionRejected"
    assert "not a registered submitting app" in (dead.dead_letter_error_description or "")
    assert app.states.get("o-1") is None and app.statuses("status-app-a") == []


def test_status_messages_go_only_to_the_submitters_own_queue(app: App) -> None:
    app.submit(submission("a-1", app="app-a"))
    app.submit(submission("b-1", app="app-b"))
    app.run_until_terminal("a-1", "b-1")
    queue_a = app.statuses("status-app-a")
    queue_b = app.statuses("status-app-b")
    assert {s["OrderID"] for s in queue_a} == {"a-1"}
    assert {s["OrderID"] for s in queue_b} == {"b-1"}
    assert [s["Status"] for s in queue_a] == ["received", "completed"]


class BrokenOrders:
    """Fault injection: the orders database is down for every delivery."""

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        def fail(*args: object, **kwargs: object) -> None:
            raise ConnectionError("injected: the orders database is unreachable")

        return fail


def test_a_submission_that_fails_on_every_delivery_is_dead_lettered_with_its_cause_and_an_alert(
    app_in_process: App,
) -> None:
    app = app_in_process
    function_app = sys.modules["function_app"]
    real = function_app.ports()
    function_app.ports = lambda: replace(real, orders=BrokenOrders())
    app.submit(submission("o-1"))
    app.run_until(lambda: bool(app.dead_letters("orders")))
    [dead] = app.dead_letters("orders")
    assert dead.dead_letter_reason == "ProcessingFailed"
    assert "orders database is unreachable" in (dead.dead_letter_error_description or "")
    assert dead.delivery_count == 5  # retried first, as the queue allows
    assert [a["Event"] for a in app.alerts()] == ["SubmissionRejected"]
