"""``ops`` as operators expect: readable records, an order's timeline, ``--json`` anywhere, one-line
errors with exit codes, any registered app, and alerts acknowledged off their queue."""

import dataclasses
import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from adapters.local_settings import SETTINGS_FILE_VARIABLE
from domain.errors import DependencyUnavailable
from ops import orders, queues
from ops.cli import EXIT_REFUSED, EXIT_USAGE, main
from ops.errors import Refused
from ops.output import Output
from tests.support.app import App, submission
from tests.support.scripted_agent import Answer


def ops(*argv: str, width: int = 200) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), Console(file=out, width=width))
    return code, out.getvalue()


def test_status_is_one_field_a_line_within_80_columns(app: App) -> None:
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    code, text = ops("status", "o-1", width=80)
    assert code == 0
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.split()[:2] == ["ProcessState", "Processed"] for line in lines)
    assert any(line.split()[0] == "CompletedSteps" and "ValidateOrder" in line for line in lines)


def test_json_goes_before_or_after_the_command(app: App) -> None:
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    before = json.loads(ops("--json", "status", "o-1")[1])
    after = json.loads(ops("status", "o-1", "--json")[1])
    assert before == after and before[0]["ProcessState"] == "Processed"
    assert json.loads(ops("dlq", "list", "orders", "--json")[1]) == []


def test_show_is_the_orders_timeline_from_every_store(app: App) -> None:
    app.agent.script = lambda r, n: Answer("permanent") if r.Step == "ChargePayment" else Answer("ok")
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    code, text = ops("--json", "show", "o-1")
    assert code == 0
    events = json.loads(text)
    assert [e["At"] for e in events] == sorted(e["At"] for e in events)
    sources = {e["Source"] for e in events}
    assert {"orders database", "state record", "compensation log", "status-app-a"} <= sources
    assert any("Compensated" in e["Event"] for e in events if e["Source"] == "state record")
    assert any(e["Event"].startswith("ReserveInventory done") for e in events)
    assert any(e["Event"].startswith("status failed") or "compensated" in e["Event"] for e in events)
    assert ops("show", "nobody")[0] == EXIT_REFUSED


def test_any_registered_app_submits_and_an_unknown_one_is_named(app: App) -> None:
    code, text = ops("--json", "submit", "--order-id", "cli-1", "--app", "app-b")
    assert code == 0 and json.loads(text)[0]["OrderID"] == "cli-1"
    code, text = ops("submit", "--order-id", "cli-2", "--app", "zz")
    assert code == EXIT_USAGE
    assert text.strip() == "ops: --app 'zz' is not a registered app (SAS_SUBMITTERS: app-a, app-b)"


def test_an_unknown_queue_is_a_one_line_usage_error(app: App) -> None:
    code, text = ops("dlq", "list", "nope")
    assert code == EXIT_USAGE and len(text.strip().splitlines()) == 1
    assert "unknown queue 'nope'" in text and "orders" in text


def test_a_malformed_settings_file_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "local.settings.json"
    broken.write_text('{"Values": {"SAS_PROFILE": ')
    monkeypatch.setenv(SETTINGS_FILE_VARIABLE, str(broken))
    code, text = ops("list")
    assert code == EXIT_USAGE and len(text.strip().splitlines()) == 1
    assert f"{broken} is not valid JSON" in text


def test_a_bad_argument_is_one_line_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["list", "--state", "Nope"])
    assert exited.value.code == EXIT_USAGE
    stderr = capsys.readouterr().err
    assert len(stderr.strip().splitlines()) == 1 and "invalid choice: 'Nope'" in stderr


def test_alerts_are_acknowledged_one_by_one_or_drained(app: App) -> None:
    app.agent.script = lambda r, n: Answer("silent") if r.Step == "ReserveInventory" else Answer("ok")
    for order_id in ("o-1", "o-2", "o-3"):
        app.submit(submission(order_id))
    app.run_until_terminal("o-1", "o-2", "o-3")
    listed = json.loads(ops("--json", "alerts")[1])
    assert len(listed) >= 3
    first = listed[0]["MessageId"]
    assert ops("alerts", "ack", first)[0] == 0
    assert [a["MessageId"] for a in json.loads(ops("--json", "alerts")[1])] == [
        a["MessageId"] for a in listed[1:]
    ]
    code, text = ops("alerts", "ack", first)
    assert code == EXIT_REFUSED and "no alert" in text
    assert ops("alerts", "drain", "--event", "NoSuchEvent")[0] == 0
    assert len(app.alerts()) == len(listed) - 1
    assert ops("alerts", "drain")[0] == 0
    assert app.alerts() == []


def _smoke(app: App, *argv: str) -> tuple[int, str]:
    """``ops smoke`` blocks until the order's final status: run it beside the host, which the
    test drives (virtual time) until the command has returned."""
    result: list[tuple[int, str]] = []
    thread = threading.Thread(target=lambda: result.append(ops("smoke", "--interval", "0.02", *argv)))
    thread.start()
    app.run_until(lambda: not thread.is_alive())
    thread.join()
    return result[0]


def test_smoke_follows_one_order_to_completed_on_the_apps_status_queue(app: App) -> None:
    code, text = _smoke(app, "--app", "b")
    lines = text.splitlines()
    assert code == 0, text
    assert lines[0].startswith("smoke: submitted: OrderID=smoke-")
    assert [line.split("Status=")[1].split(",")[0] for line in lines[1:-1]] == ["received", "completed"]
    assert all("status on status-app-b" in line for line in lines[1:-1])
    assert lines[-1].startswith("smoke: ok:")


def test_smoke_says_how_an_order_that_did_not_complete_ended(app: App) -> None:
    app.agent.script = lambda r, n: Answer("permanent") if r.Step == "ChargePayment" else Answer("ok")
    code, text = _smoke(app, "--json")
    steps = [json.loads(line) for line in text.splitlines()[:-1]]
    assert code == EXIT_REFUSED
    assert [s.get("Status") for s in steps[1:]] == ["received", "compensated"]
    assert "ended compensated: ChargePayment" in text.splitlines()[-1]


def test_show_without_the_orders_database_or_a_queue_shows_the_rest(app: App) -> None:
    """As under ``--azd`` when Azure SQL keeps the operator out (no driver, its firewall) or a
    status queue is another app's: one line each says what was not read, and why."""
    app.submit(submission("o-1"))
    app.run_until_terminal("o-1")
    ports = app.ports()
    local = queues.browser(ports)

    class NoSql:
        def get(self, order_id: str) -> None:
            raise DependencyUnavailable("orders database", "the firewall refused this address")

    class NotStatusQueues:
        def peek(self, queue: str, limit: int) -> Any:
            if queue.startswith("status-"):
                raise Refused(f"Service Bus refused the deployer on {queue!r}")
            return local.peek(queue, limit)

        def resubmit_dead_letter(self, queue: str, message_id: str) -> bool:
            raise AssertionError("show moves nothing")

        def remove(self, queue: str, message_ids: set[str] | None) -> list[str]:
            raise AssertionError("show removes nothing")

    out = io.StringIO()
    unread = dataclasses.replace(ports, orders=NoSql())  # type: ignore[arg-type]
    orders.timeline(unread, Output(Console(file=out), as_json=True), "o-1", NotStatusQueues())
    events = json.loads(out.getvalue())
    assert {
        "Source": "orders database",
        "At": "",
        "Event": "not read: the firewall refused this address",
    } in events
    assert any(
        e["Source"] == "status-app-a" and e["Event"].startswith("not read: Service Bus refused")
        for e in events
    )
    assert any(e["Source"] == "state record" and "Processed" in e["Event"] for e in events)
