"""The app in several worker processes, as FUNCTIONS_WORKER_PROCESS_COUNT runs it on Azure, and
a worker killed with invocations in flight: restarted, its invocations failed as the host fails
them (a message abandoned and delivered again, an activity failed to its orchestration, an
episode replayed), and no order lost or acted on twice."""

import asyncio
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from domain.states import ProcessState
from harness.devhost.worker_processes import WorkerProcesses
from tests.support.app import App, start_app, submission

FORWARD = ("ReserveInventory", "ChargePayment")
UNDO = ("ReleaseInventory", "RefundPayment")
TERMINAL = {"completed", "failed", "compensated", "compensation-failed"}


def _two_workers(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[App, WorkerProcesses]:
    app = start_app(loop, tmp_path, monkeypatch, settings={"FUNCTIONS_WORKER_PROCESS_COUNT": "2"})
    assert isinstance(app.host.worker, WorkerProcesses)
    return app, app.host.worker


def test_invocations_spread_over_the_worker_processes(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, workers = _two_workers(loop, tmp_path, monkeypatch)
    served: Counter[int] = Counter()
    workers.on_sent.append(lambda pid, _: served.update([pid]))
    try:
        orders = [f"spread-{n}" for n in range(10)]
        for order_id in orders:
            app.submit(submission(order_id))
        app.run_until_terminal(*orders)
        assert set(served) == set(workers.pids) and len(served) == 2
        assert min(served.values()) > sum(served.values()) / 4  # neither worker idles
    finally:
        app.stop()


def test_a_worker_killed_mid_burst_is_restarted_and_no_order_is_lost_or_acted_on_twice(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app, workers = _two_workers(loop, tmp_path, monkeypatch)
    trigger = {spec.function_id: spec.trigger_type for spec in app.host.functions}
    # One kill with each kind of invocation in flight, a while into the burst.
    victims = ["orchestrationTrigger", "activityTrigger", "serviceBusTrigger"]
    seen: Counter[str] = Counter()
    killed: list[str] = []

    def kill_now_and_then(pid: int, function_id: str) -> None:
        kind = trigger[function_id]
        seen[kind] += 1
        if victims and kind == victims[0] and seen[kind] > 10:
            os.kill(pid, signal.SIGKILL)  # the invocation just sent is in flight on it
            killed.append(victims.pop(0))

    workers.on_sent.append(kill_now_and_then)
    try:
        orders = [f"kill-{n}" for n in range(30)]
        for order_id in orders:
            app.submit(submission(order_id, app="app-a" if len(order_id) % 2 else "app-b"))
        app.run_until_terminal(*orders, days=3)
        app.run_until(lambda: workers.restarts == len(killed) and len(workers.pids) == 2)

        # An episode whose worker died is replayed, not failed (the extension abandons the work item):
        # every attempt ends Completed, once the timers of those superseded have fired.
        def statuses() -> set[str]:
            return {i["runtimeStatus"] for i in app.host.engine.list_instances()}

        app.run_until(lambda: not statuses() & {"Pending", "Running"}, days=3)
        assert statuses() == {"Completed"}
    finally:
        app.stop()

    assert killed == ["orchestrationTrigger", "activityTrigger", "serviceBusTrigger"]
    assert workers.restarts == 3
    told: Counter[str] = Counter()
    for queue in ("status-app-a", "status-app-b"):
        told.update(s["OrderID"] for s in app.statuses(queue) if s["Status"] in TERMINAL)
    for order_id in orders:
        record = app.record(order_id)
        effects = {step: app.agent.net_effect(order_id, step) for step in FORWARD + UNDO}
        if record.ProcessState is ProcessState.PROCESSED:
            assert effects == {"ReserveInventory": 1, "ChargePayment": 1, **dict.fromkeys(UNDO, 0)}, order_id
        else:  # compensated: what was done is undone, once
            assert record.ProcessState is ProcessState.COMPENSATED, (order_id, record.ProcessState)
            for step, undo in zip(FORWARD, UNDO, strict=True):
                assert effects[step] == effects[undo] <= 1, (order_id, effects)
        assert told[order_id] == 1, order_id  # the app heard of its ending once
