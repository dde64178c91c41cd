"""The whole app on devhost: submission → starter → orchestration → agent → Processed."""

from domain.states import ProcessState
from tests.app.conftest import App, submission


def test_an_order_is_processed_end_to_end(app: App) -> None:
    app.submit(submission("order-1"))
    app.run_until_terminal("order-1")
    record = app.record("order-1")
    assert record.ProcessState is ProcessState.PROCESSED
    assert record.CompletedSteps == ("ValidateOrder", "ReserveInventory", "ChargePayment", "ConfirmOrder")
    assert record.Attempt == 1 and record.FailureCount == 0 and record.LockedBy is None
    assert app.agent.net_effect("order-1", "ReserveInventory") == 1
    assert app.agent.net_effect("order-1", "ChargePayment") == 1
    assert [s["Status"] for s in app.statuses("status-app-a")] == ["received", "completed"]
    assert app.alerts() == []
