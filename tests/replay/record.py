"""Regenerate the replay corpus (tests/replay/histories/) from real runs of the demo's scenarios:
the real function_app.py on devhost (worker process, virtual clock) with the scripted agent,
each scenario's instances exported by ``ops replay export`` from devhost's task hub.

    python -m tests.replay.record [--out tests/replay/histories]

Scenarios: the happy path; a refused step compensated; a lost reply recovered by the
Supervisor's next attempt; a reply that loses the race with the step's timer; workflow v2; the
first engine (order_workflow_v1) on a record it claimed. Every instance they leave is kept.
"""

import argparse
import asyncio
import dataclasses
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from contracts.names import orchestrator_name
from domain.messages import AgentRequest
from harness.devhost.durable_wire import FINISHED, RuntimeStatus
from ops.replay_history import RecordedHistory, from_devhost, write_histories
from services.claim_pending import claim_pending
from tests.support.app import App, start_app, submission
from tests.support.scripted_agent import OK, Answer

HISTORIES = Path(__file__).parent / "histories"
SILENT = Answer("silent")
Scenario = Callable[[App], None]


def happy(app: App) -> None:
    app.submit(submission("happy-1"))
    app.run_until_terminal("happy-1")


def compensated(app: App) -> None:
    app.agent.script = lambda request, n: Answer("permanent") if request.Step == "ChargePayment" else OK
    app.submit(submission("refused-1"))
    app.run_until_terminal("refused-1")


def lost_reply(app: App) -> None:
    # The first ReserveInventory's reply never comes: attempt 1 times out, attempt 2 succeeds.
    app.agent.script = lambda request, n: SILENT if (request.Step, n) == ("ReserveInventory", 1) else OK
    app.submit(submission("lost-1"))
    app.run_until_terminal("lost-1")


def reply_after(order_id: str, delay: timedelta) -> Scenario:
    """The first ReserveInventory's reply comes ``delay`` after its request."""

    def scenario(app: App) -> None:
        def script(request: AgentRequest, n: int) -> Answer:
            return Answer("ok", delay=delay) if (request.Step, n) == ("ReserveInventory", 1) else OK

        app.agent.script = script
        app.submit(submission(order_id))
        app.run_until_terminal(order_id)

    return scenario


def version_2(app: App) -> None:
    app.submit(submission("v2-1"))
    app.run_until_terminal("v2-1")


def first_engine(app: App) -> None:
    # One slot, held by an order whose agent stays silent: the next order stays Pending for the
    # first engine to claim, as an older deployment's starter did (C7).
    app.agent.script = lambda request, n: SILENT if request.OrderID == "hold-1" else OK
    app.submit(submission("hold-1"))
    app.run_until(lambda: app.agent.asked["ReserveInventory"] >= 1)
    app.submit(submission("first-1"))
    app.run_until(lambda: app.states.get("first-1") is not None)
    ports = app.ports()
    policy = ports.settings.scheduler_policy
    report = claim_pending(ports.states, ports.clock, policy, max_in_flight=60, batch_size=1)
    [claim] = report.claims
    app.host.engine.start(
        orchestrator_name(claim.workflow_version), claim.instance_id, f'{{"OrderID": "{claim.order_id}"}}'
    )
    app.run_until_terminal("first-1")


SCENARIOS: dict[str, tuple[Scenario, dict[str, str]]] = {
    "happy": (happy, {}),
    "compensated": (compensated, {}),
    "lost-reply": (lost_reply, {}),
    # After the step's CompleteBy: the timer wins, the reply is stray.
    "late-reply": (reply_after("race-1", timedelta(minutes=2)), {}),
    "version-2": (version_2, {"SAS_WORKFLOW_VERSION": "v2"}),
    "first-engine": (first_engine, {"SAS_MAX_IN_FLIGHT": "1"}),
}


def record(name: str, scenario: Scenario, settings: dict[str, str]) -> list[RecordedHistory]:
    """Run one scenario on a fresh host and data; its instances that ended."""
    loop = asyncio.new_event_loop()
    patch = pytest.MonkeyPatch()
    try:
        with tempfile.TemporaryDirectory(prefix=f"replay-{name}-") as tmp:
            app = start_app(loop, Path(tmp), patch, settings=settings)
            try:
                scenario(app)
                # An attempt that returned still waits for its step's timer: let every one end.
                store = app.host.engine.store
                app.run_until(lambda: all(i.status in FINISHED for i in store.instances()))
            finally:
                app.stop()
            ended = {str(status) for status in FINISHED} - {RuntimeStatus.TERMINATED}
            exported = from_devhost(Path(tmp) / "devhost" / "durable.db")
            # Named by its scenario, not by the temporary directory it ran in: a rerun diffs clean.
            source = f"devhost:python -m tests.replay.record --only {name}"
            return [dataclasses.replace(h, source=source) for h in exported if h.runtimeStatus in ended]
    finally:
        patch.undo()
        loop.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.replay.record", description=__doc__)
    parser.add_argument("--out", type=Path, default=HISTORIES)
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args(argv)
    for name in args.only or SCENARIOS:
        scenario, settings = SCENARIOS[name]
        written = write_histories(record(name, scenario, settings), args.out)
        print(f"{name}: {', '.join(p.name for p in written)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
