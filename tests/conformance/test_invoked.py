"""Conformance means invoked, not only indexed: every function of the deployment package runs
through devhost's worker processes (the package, requirements.txt alone, the real worker behind
a gRPC stream), as the platform runs it, and one order goes end to end."""

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from contracts.names import orchestrator_name
from domain.states import ProcessState
from harness.devhost.worker_processes import WorkerProcesses
from services.claim_pending import claim_pending
from tests.support.app import App, order_body, start_app, submission

# devhost start with the real Functions worker.
pytestmark = pytest.mark.processes


def test_every_function_runs_in_a_worker_process_and_one_order_goes_end_to_end(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One in flight, so the second order waits Pending for the older deployment's engine below.
    app: App = start_app(loop, tmp_path, monkeypatch, settings={"SAS_MAX_IN_FLIGHT": "1"})
    try:
        workers = app.host.worker
        assert isinstance(workers, WorkerProcesses) and len(workers.pids) == 1
        status, _, _ = app.http("POST", "/api/orders", order_body("conf-1"))  # HTTP, then the bus
        assert status == 202
        app.run_until(lambda: (stored := app.states.get("conf-1")) is not None and stored.record.Attempt == 1)
        app.submit(submission("conf-v1"))
        app.submit(submission("conf-v2"))
        app.run_until(lambda: all(app.states.get(o) is not None for o in ("conf-v1", "conf-v2")))

        # The first engine (kept for attempts an older deployment started, C7): claims that
        # deployment made, started on the orchestrator of each version it ran.
        ports = app.ports()
        report = claim_pending(
            ports.states, ports.clock, ports.settings.scheduler_policy, max_in_flight=60, batch_size=5
        )
        claims = {c.order_id: c for c in report.claims}
        for order_id, version in (("conf-v1", "v1"), ("conf-v2", "v2")):
            claim = claims[order_id]
            app.host.engine.start(
                orchestrator_name(version), claim.instance_id, f'{{"OrderID": "{order_id}"}}'
            )
        app.run_until_terminal("conf-1", "conf-v1", "conf-v2")
        app.settle(timedelta(minutes=1))  # the starter's and the Supervisor's schedules come round
        assert app.http("GET", "/api/orders/conf-1")[0] == 200

        assert app.record("conf-1").ProcessState is ProcessState.PROCESSED
        assert app.record("conf-v1").ProcessState is ProcessState.PROCESSED
        invoked = set(app.host.invocations_by_function)
        assert invoked == {spec.name for spec in app.host.functions}
        kinds = {spec.trigger_type for spec in app.host.functions}
        assert kinds == {
            "httpTrigger",
            "serviceBusTrigger",
            "timerTrigger",
            "orchestrationTrigger",
            "activityTrigger",
        }
        with_client = {spec.name for spec in app.host.functions if spec.client_param}
        assert with_client and with_client <= invoked  # the Durable client binding, used
        assert workers.restarts == 0
    finally:
        app.stop()
