"""The app on the embedded profile with the recovery index on (SAS_RECOVERY_INDEX, E14): the
Supervisor finds expired work through the index, and every order still ends terminal."""

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from domain.messages import AgentRequest
from domain.recovery_index import recovery_bucket
from domain.states import ProcessState
from services.indexed_state_store import IndexedStateStore
from tests.support.app import App, start_app, submission
from tests.support.scripted_agent import OK, Answer

SILENT = Answer("silent")


@pytest.fixture
def indexed_app(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[App]:
    running = start_app(loop, tmp_path, monkeypatch, settings={"SAS_RECOVERY_INDEX": "true"})
    yield running
    running.stop()


def test_expired_orders_are_recovered_through_the_index_and_all_end_terminal(indexed_app: App) -> None:
    app = indexed_app
    assert isinstance(app.states, IndexedStateStore)

    charges: list[str] = []

    def script(request: AgentRequest, n: int) -> Answer:
        # ``n`` counts the action over every order; this order's first charge is what stays silent.
        if request.OrderID == "silent-once" and request.Step == "ChargePayment":
            charges.append(request.InstanceID)
            return SILENT if len(charges) == 1 else OK
        if request.OrderID == "always-silent" and request.Step == "ReserveInventory":
            return SILENT
        return OK

    app.agent.script = script
    orders = ["silent-once", "always-silent", *(f"ok-{n}" for n in range(4))]
    for order_id in orders:
        app.submit(submission(order_id))
    app.run_until_terminal(*orders)

    once = app.record("silent-once")
    assert once.ProcessState is ProcessState.PROCESSED
    assert once.Attempt == 2 and once.FailureCount == 1
    gave_up = app.record("always-silent")
    assert gave_up.ProcessState is ProcessState.ERROR
    assert gave_up.FailureCount == 5  # 1 + 2 quick + 2 after cool-downs, all found via the index
    assert [a["Event"] for a in app.alerts()] == ["RecoveryGaveUp"]
    for order_id in orders[2:]:
        assert app.record(order_id).ProcessState is ProcessState.PROCESSED

    # Later scans drop every stale entry the finished orders left, and the cursor follows.
    app.settle(timedelta(minutes=15))
    index = app.states.index
    now = app.host.clock.now()
    cursor = index.cursor()
    assert cursor is not None and cursor >= recovery_bucket(now, index.bucket_size) - 2 * index.bucket_size
    assert index.first_bucket(cursor - timedelta(days=1), now)[0] is None
