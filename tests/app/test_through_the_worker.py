"""devhost runs every function of the app through the real Functions worker, none around it."""

from collections import Counter
from datetime import timedelta
from typing import Any

import azure_functions_runtime as runtime
import pytest

from domain.states import ProcessState
from orchestrators import first_engine
from tests.app.conftest import App, order_body

FIRST_ENGINE = {*first_engine.ORCHESTRATORS, *first_engine.ACTIVITIES}


def test_one_order_invokes_every_function_through_the_workers_invocation_request(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = {spec.function_id: spec.name for spec in app.host.functions}
    seen: Counter[str] = Counter()
    real = runtime.invocation_request

    async def spy(request: Any) -> Any:
        seen[names[request.request.invocation_request.function_id]] += 1
        return await real(request)

    # devhost reaches the worker only through this module attribute, as the proxy worker does.
    monkeypatch.setattr(runtime, "invocation_request", spy)
    status, _, _ = app.http("POST", "/api/orders", order_body("via-worker"))
    assert status == 202
    app.run_until_terminal("via-worker")
    app.settle(timedelta(minutes=1))  # the Supervisor's schedule comes round too
    assert app.http("GET", "/api/orders/via-worker")[0] == 200

    assert app.record("via-worker").ProcessState is ProcessState.PROCESSED
    # The first engine's functions serve only attempts an older deployment started (test_concurrency
    # starts some through the worker).
    assert set(seen) == {spec.name for spec in app.host.functions} - FIRST_ENGINE
    kinds = {spec.trigger_type for spec in app.host.functions}
    assert kinds == {"httpTrigger", "serviceBusTrigger", "timerTrigger", "orchestrationTrigger"} | {
        "activityTrigger"
    }
    assert sum(seen.values()) == sum(app.host.invocations.values())
