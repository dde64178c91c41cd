"""Admission control sees the queue (C3): a burst posted faster than the submission function
takes it off the orders queue is refused with 429s past the threshold, and nothing admitted is lost."""

import json
from datetime import timedelta

from domain.states import ProcessState
from tests.support.app import order_body, start_app

THRESHOLD = 10
BURST = 30
CACHE_SECONDS = 5  # SAS_QUEUE_DEPTH_CACHE_SECONDS's default


def test_a_fast_burst_past_the_threshold_gets_429s_and_loses_nothing(loop, tmp_path, monkeypatch) -> None:
    settings = {"SAS_BACKLOG_THRESHOLD": str(THRESHOLD), "SAS_MAX_IN_FLIGHT": "5"}
    app = start_app(loop, tmp_path, monkeypatch, settings=settings)
    try:
        # The whole burst is posted before the host takes anything off the queue (the virtual
        # clock stands still between posts): no Pending record exists yet, only messages.
        answers = {
            f"b-{n:02d}": app.http("POST", "/api/orders", order_body(f"b-{n:02d}")) for n in range(BURST)
        }
        accepted = [o for o, (status, _, _) in answers.items() if status == 202]
        refused = [o for o, (status, _, _) in answers.items() if status == 429]
        assert len(accepted) == THRESHOLD and len(refused) == BURST - THRESHOLD
        for order_id in refused:
            _, body, headers = answers[order_id]
            assert int(headers["Retry-After"]) >= 1
            assert json.loads(body)["error"] == "Backlog"
        app.run_until_terminal(*accepted)
        assert all(app.record(o).ProcessState is ProcessState.PROCESSED for o in accepted)
        assert all(app.states.get(o) is None for o in refused)  # refused means not taken
        # Once drained, and the cached count read again, the refused orders are welcome.
        app.settle(timedelta(seconds=CACHE_SECONDS))
        retried = [app.http("POST", "/api/orders", order_body(o))[0] for o in refused[: THRESHOLD - 1]]
        assert retried == [202] * (THRESHOLD - 1)
    finally:
        app.stop()
