"""The front end (E1, C3): 202 with a status URL under the backlog threshold, 429 over it; a
conflict answered at once with 409; every caller authenticated (see test_isolation.py)."""

import json
import logging
import sqlite3
from datetime import timedelta

import pytest

from domain.states import ProcessState
from tests.support.app import App, order_body, start_app
from tests.support.scripted_agent import OK, Answer


def test_an_order_posted_to_the_api_is_processed_and_visible(app: App) -> None:
    status, text, headers = app.http("POST", "/api/orders", order_body("web-1"))
    assert status == 202
    body = json.loads(text)
    assert body["statusUrl"] == "/api/orders/web-1" and headers["Location"] == "/api/orders/web-1"
    app.run_until_terminal("web-1")
    status, text, _ = app.http("GET", "/api/orders/web-1")
    view = json.loads(text)
    assert status == 200 and view["ProcessState"] == "Processed" and view["Attempt"] == 1
    assert "LockedBy" not in view and "OrderHash" not in view  # no internals
    assert app.http("GET", "/api/orders/nobody")[0] == 404
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "completed"]
    # Amounts keep their cents all the way to the remote service (through SQL's minor units).
    order = app.agent.requests[0].Payload
    assert order["Total"] == "20.00" and order["Lines"][0]["UnitPrice"] == "10.00"


def test_a_bad_order_is_refused_with_the_reason(app: App) -> None:
    status, text, _ = app.http("POST", "/api/orders", order_body("web-1", Total=1.0))
    assert status == 400 and "does not equal" in json.loads(text)["detail"]
    status, text, _ = app.http("POST", "/api/orders", order_body("web-2", Customer="Con\u0000toso"))
    assert status == 400 and "Customer" in json.loads(text)["detail"]
    assert app.states.get("web-1") is None and app.states.get("web-2") is None


def test_a_repost_of_the_same_order_is_idempotent(app: App) -> None:
    assert app.http("POST", "/api/orders", order_body("web-1"))[0] == 202
    app.run_until(lambda: app.states.get("web-1") is not None)
    assert app.http("POST", "/api/orders", order_body("web-1", SubmittedAt="2026-03-01T10:00:00Z"))[0] == 202
    app.run_until_terminal("web-1")
    assert app.http("POST", "/api/orders", order_body("web-1"))[0] == 202
    app.settle(timedelta(minutes=1))
    assert app.record("web-1").Attempt == 1
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "completed"]
    assert app.dead_letters("orders") == [] and app.alerts() == []


def test_a_conflicting_order_gets_409_with_the_reason_and_changes_nothing(app: App) -> None:
    """Different data under a known OrderID: refused while the caller waits, never dropped."""
    assert app.http("POST", "/api/orders", order_body("web-1"))[0] == 202
    app.run_until_terminal("web-1")
    before = app.states.get("web-1")
    lines = [{"Sku": "SKU-9", "Quantity": 1, "UnitPrice": 20.0}]
    status, text, _ = app.http("POST", "/api/orders", order_body("web-1", Lines=lines))
    assert status == 409 and json.loads(text)["error"] == "OrderConflict"
    assert app.states.get("web-1") == before
    assert app.bus.counts("orders")["active"] == 0  # nothing was queued for it


def test_over_the_backlog_threshold_the_api_answers_429_with_retry_after(loop, tmp_path, monkeypatch) -> None:
    # One order in flight at a time, and the agent silent: the first order is started at once
    # and holds the only slot, so the next ones wait Pending, and the backlog builds up. Each
    # post comes after the backlog's cached count has expired, so it sees the records exactly
    # (within the cache, the front end counts what it admitted as queued: test_admission.py).
    settings = {"SAS_BACKLOG_THRESHOLD": "3", "SAS_MAX_IN_FLIGHT": "1", "SAS_QUEUE_DEPTH_CACHE_SECONDS": "1"}
    app = start_app(loop, tmp_path, monkeypatch, settings=settings)
    app.agent.script = lambda request, asked: Answer("silent")
    try:
        codes = []
        for n in range(6):
            status, _, headers = app.http("POST", "/api/orders", order_body(f"b-{n}"))
            codes.append((status, headers.get("Retry-After")))
            # Let the submission land before the next post.
            app.run_until(lambda n=n, s=status: s != 202 or app.states.get(f"b-{n}") is not None)
            app.settle(timedelta(seconds=1))
        assert [status for status, _ in codes] == [202] * 4 + [429] * 2
        # Retry-After: from the drain rate measured so far (b-0 left the backlog), at least 1 s.
        assert [after is None for _, after in codes] == [True] * 4 + [False] * 2
        assert all(int(after) >= 1 for _, after in codes[4:])  # type: ignore[arg-type]
        assert app.record("b-0").ProcessState is ProcessState.PROCESSING
        assert {app.record(f"b-{n}").ProcessState for n in range(1, 4)} == {ProcessState.PENDING}
        app.agent.script = lambda request, asked: OK
        app.run_until_terminal("b-0", "b-1", "b-2", "b-3")  # the backlog drains ...
        app.settle(timedelta(seconds=1))
        assert app.http("POST", "/api/orders", order_body("b-6"))[0] == 202  # ... and 202 again
    finally:
        app.stop()


def test_every_error_is_the_same_json_with_the_invocation_id(app: App) -> None:
    refused = [
        app.http("POST", "/api/orders", order_body("web-1"), app=None),
        app.http("GET", "/api/orders/x"),
    ]
    for status, text, headers in refused:
        body = json.loads(text)
        assert status in (401, 404) and headers["Content-Type"].startswith("application/json")
        assert set(body) == {"error", "detail", "invocationId"} and body["invocationId"]
    assert json.loads(refused[0][1])["invocationId"] != json.loads(refused[1][1])["invocationId"]


def test_a_queue_the_front_end_cannot_open_is_a_json_500_whose_invocation_id_the_log_carries(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    # The orders queue gone from the bus under the running app: the send cannot open it.
    with sqlite3.connect(app.host.config.servicebus_path) as bus:
        bus.execute("DELETE FROM queues WHERE name = 'orders'")
    caplog.set_level(logging.ERROR, logger="devhost")
    status, text, headers = app.http("POST", "/api/orders", order_body("web-1"))
    assert status == 500 and headers["Content-Type"].startswith("application/json")
    body = json.loads(text)
    assert set(body) == {"error", "detail", "invocationId"} and body["error"] == "InternalError"
    assert "orders" not in body["detail"] and "QueueNotFound" not in body["detail"]  # nothing internal
    logged = [r.getMessage() for r in caplog.records if body["invocationId"] in r.getMessage()]
    assert any("post_order failed" in line for line in logged), logged
