"""The operator CLI against the app on devhost: moves the state machine allows, clear refusals."""

import io
import json

from rich.console import Console

from ops.cli import main
from tests.support.app import App, submission
from tests.support.scripted_agent import Answer


def ops(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), Console(file=out, width=200))
    return code, out.getvalue()


def test_resubmit_and_compensate_follow_the_state_machine(app: App) -> None:
    app.agent.script = lambda r, n: (
        Answer("silent") if r.Step == "ReserveInventory" and n <= 5 else Answer("ok")
    )
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    code, text = ops("--json", "status", "o-1")
    assert code == 0 and json.loads(text)[0]["ProcessState"] == "Error"

    code, text = ops("resubmit", "o-1")
    assert code == 0 and "Pending" in text
    code, text = ops("resubmit", "o-1")  # Pending is not Error
    assert code == 1 and "o-1 is Pending: only an order in Error can be resubmitted" in text
    assert "resubmit:" not in text  # the operator's words, not the state machine's move name

    app.run_until_terminal("o-1")
    assert app.record("o-1").ProcessState.value == "Processed"
    code, text = ops("compensate", "o-1")
    assert code == 1 and "Processed" in text  # a processed order is not undone by an operator
    assert "request_compensation" not in text and "compensate:" not in text

    code, text = ops("status", "nobody")
    assert code == 1 and "no order 'nobody'" in text


def test_compensate_an_error_order(app: App) -> None:
    app.agent.script = lambda request, n: (
        Answer("silent") if request.Step == "ChargePayment" else Answer("ok")
    )
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    assert app.record("o-1").ProcessState.value == "Error"  # ChargePayment never answered
    assert ops("compensate", "o-1")[0] == 0
    app.run_until_terminal("o-1")
    assert app.record("o-1").ProcessState.value == "Compensated"
    assert app.agent.net_effect("o-1", "ReleaseInventory") == 1


def test_list_alerts_and_dead_letters(app: App) -> None:
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    app.submit(submission("o-1", quantity=9), message_id="o-1-conflict")
    app.run_until(lambda: bool(app.dead_letters("orders")))

    code, text = ops("--json", "list", "--state", "Processed")
    assert code == 0 and [r["OrderID"] for r in json.loads(text)] == ["o-1"]
    code, text = ops("--json", "alerts")
    assert [a["Event"] for a in json.loads(text)] == ["SubmissionRejected"]
    code, text = ops("--json", "dlq", "list", "orders")
    [dead] = json.loads(text)
    assert dead["MessageId"] == "o-1-conflict" and dead["Reason"] == "OrderConflict"

    assert ops("dlq", "resubmit", "orders", "o-1-conflict")[0] == 0
    assert app.dead_letters("orders") == []
    app.run_until(lambda: bool(app.dead_letters("orders")))  # still a conflict: dead-lettered again
    code, text = ops("dlq", "resubmit", "orders", "nope")
    assert code == 1 and "no dead-lettered message" in text
    code, text = ops("--json", "watch", "--once")
    assert {r["ProcessState"]: r["orders"] for r in json.loads(text)}["Processed"] == 1


def test_submit_goes_through_the_front_end_checks(app: App) -> None:
    code, text = ops("--json", "submit", "--order-id", "cli-1", "--app", "b")
    assert code == 0 and json.loads(text)[0]["OrderID"] == "cli-1"
    app.run_until_terminal("cli-1")
    assert [s["OrderID"] for s in app.statuses("status-app-b")] == ["cli-1", "cli-1"]
    code, text = ops("submit", "--order-id", "bad/id")
    assert code == 1 and "OrderID" in text


def test_dlq_resubmit_moves_only_its_message(app: App) -> None:
    """The other dead letters are neither received nor counted: their delivery counts stay."""
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    for n in range(3):
        app.submit(submission("o-1", quantity=5 + n), message_id=f"o-1-conflict-{n}")
    app.run_until(lambda: len(app.dead_letters("orders")) == 3)
    before = {m.message_id: m.delivery_count for m in app.dead_letters("orders")}

    assert ops("dlq", "resubmit", "orders", "o-1-conflict-1")[0] == 0
    after = {m.message_id: m.delivery_count for m in app.dead_letters("orders")}
    assert after == {k: v for k, v in before.items() if k != "o-1-conflict-1"}
