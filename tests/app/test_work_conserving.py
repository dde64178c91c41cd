"""Work-conserving claims: the slot an ending attempt frees starts the oldest Pending order at
once, so a backlog past the in-flight cap drains at the rate attempts end, not at the starter's."""

from datetime import timedelta

from domain.states import ProcessState
from tests.support.app import App, start_app, submission
from tests.support.scripted_agent import Answer

CAP = 3
ORDERS = 12
# Each Agent step takes this long: the backlog drains in about (ORDERS / CAP) x 3 steps x this.
STEP = timedelta(seconds=2)


def test_a_backlog_past_the_cap_drains_without_starter_ticks(loop, tmp_path, monkeypatch) -> None:
    settings = {"SAS_MAX_IN_FLIGHT": str(CAP), "SAS_STARTER_SCHEDULE": "0 0 * * * *"}
    app = start_app(loop, tmp_path, monkeypatch, settings=settings)
    try:
        app.agent.script = lambda request, asked: Answer("ok", delay=STEP)
        ids = [f"w-{n:02d}" for n in range(ORDERS)]
        first_wave, backlog = ids[:CAP], ids[CAP:]
        started = app.host.clock.now()
        # The cap is counted, then claimed (docs/operating.md: a soft cap), so submissions that
        # run side by side may each pass it. The first wave fills the cap before the rest arrive,
        # so every later submission counts a full cap and leaves its order Pending: a backlog
        # whatever the worker processes' timing.
        for order_id in first_wave:
            app.submit(submission(order_id))
        app.run_until(lambda: all(_in_state(app, i, ProcessState.PROCESSING) for i in first_wave))
        for order_id in backlog:
            app.submit(submission(order_id))
        app.run_until(lambda: all(app.states.get(i) is not None for i in ids))
        pending = [i for i in ids if app.record(i).ProcessState is ProcessState.PENDING]
        assert len(pending) >= ORDERS // 2
        app.run_until_terminal(*ids)
        assert app.host.invocations_by_function["starter"] == 0  # the hourly starter never ran
        assert all(app.record(i).ProcessState is ProcessState.PROCESSED for i in ids)
        assert all(app.record(i).Attempt == 1 for i in ids)  # started once each, never twice
        # Waves of CAP orders, back to back: well within a minute, where the starter is an hour.
        assert app.host.clock.now() - started < timedelta(minutes=1)
    finally:
        app.stop()


def _in_state(app: App, order_id: str, state: ProcessState) -> bool:
    return app.states.get(order_id) is not None and app.record(order_id).ProcessState is state
