"""The front end (E1, C3): 202 with a status URL under the backlog threshold, 429 over it."""

import json

from domain.states import ProcessState
from tests.app.conftest import App, start_app, submission


def test_an_order_posted_to_the_api_is_processed_and_visible(app: App) -> None:
    status, text, headers = app.http("POST", "/api/orders", submission("web-1").model_dump_json())
    assert status == 202
    body = json.loads(text)
    assert body["statusUrl"] == "/api/orders/web-1" and headers["Location"] == "/api/orders/web-1"
    app.run_until_terminal("web-1")
    status, text, _ = app.http("GET", "/api/orders/web-1")
    view = json.loads(text)
    assert status == 200 and view["ProcessState"] == "Processed" and view["Attempt"] == 1
    assert "LockedBy" not in view and "OrderHash" not in view  # no internals
    assert app.http("GET", "/api/orders/nobody")[0] == 404


def test_a_bad_order_is_refused_with_the_reason(app: App) -> None:
    body = json.loads(submission("web-1").model_dump_json()) | {"Total": "1.00"}
    status, text, _ = app.http("POST", "/api/orders", json.dumps(body))
    assert status == 400 and "does not equal" in json.loads(text)["detail"]
    assert app.states.get("web-1") is None


def test_over_the_backlog_threshold_the_api_answers_429_with_retry_after(loop, tmp_path, monkeypatch) -> None:
    app = start_app(loop, tmp_path, monkeypatch, settings={"SAS_BACKLOG_THRESHOLD": "3"})
    try:
        codes = []
        for n in range(5):
            status, _, headers = app.http("POST", "/api/orders", submission(f"b-{n}").model_dump_json())
            codes.append((status, headers.get("Retry-After")))
            # Let the submission land (it becomes Pending) before the next post; no claim runs yet.
            app.run_until(lambda n=n, s=status: s != 202 or app.states.get(f"b-{n}") is not None)
        assert codes == [(202, None)] * 3 + [(429, "5")] * 2
        assert {app.record(f"b-{n}").ProcessState for n in range(3)} == {ProcessState.PENDING}
        app.run_until_terminal("b-0", "b-1", "b-2")  # the backlog drains ...
        assert (
            app.http("POST", "/api/orders", submission("b-5").model_dump_json())[0] == 202
        )  # ... and 202 again
    finally:
        loop.run_until_complete(app.host.stop())
