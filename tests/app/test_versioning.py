"""Versioning (C7): a deployment that makes v2 the default leaves in-flight v1 orders on v1."""

from domain.states import ProcessState
from tests.support.app import App, start_app, submission
from tests.support.scripted_agent import OK, Answer


def test_in_flight_v1_orders_finish_on_v1_after_v2_is_deployed(app: App, loop, tmp_path, monkeypatch) -> None:
    # v1 orders get as far as waiting on the agent's ChargePayment reply, which never comes.
    app.agent.script = lambda request, n: Answer("silent") if request.Step == "ChargePayment" else OK
    app.submit(submission("old-1"))
    app.submit(submission("old-2"))
    app.run_until(lambda: app.agent.asked["ChargePayment"] == 2)
    clock = app.host.clock
    app.stop()

    # The new deployment: same data, v2 the default for new orders.
    deployed = start_app(loop, tmp_path, monkeypatch, clock=clock, settings={"SAS_WORKFLOW_VERSION": "v2"})
    app.succeeded_by(deployed)
    deployed.submit(submission("new-1"))
    deployed.run_until_terminal("old-1", "old-2", "new-1")
    for order_id in ("old-1", "old-2"):
        record = deployed.record(order_id)
        assert record.ProcessState is ProcessState.PROCESSED
        assert record.WorkflowVersion == "v1"
        assert "ShipOrder" not in record.CompletedSteps
    new = deployed.record("new-1")
    assert new.WorkflowVersion == "v2" and new.ProcessState is ProcessState.PROCESSED
    assert new.CompletedSteps[-1] == "ShipOrder"
    # One orchestrator runs every version: the steps come from the record's WorkflowVersion.
    names = {i["name"] for i in deployed.host.engine.list_instances()}
    assert names == {"order_attempt"}
