"""The whole embedded stack as real processes: devhost with function_app.py, two agent worker
processes and the flaky simulator. The simulator's ledger is the judge: the demo's own
(harness/demo/judge.py, ``effect_checks``)."""

import json
from collections import Counter
from pathlib import Path

import pytest

from domain.states import ProcessState
from harness.demo.judge import effect_checks, effects
from harness.demo.stack import Stack
from tests.support.app import submission

# devhost start, agent workers and the simulator as child processes.
pytestmark = pytest.mark.processes


@pytest.mark.slow
def test_200_orders_through_real_agents_and_a_flaky_service(tmp_path: Path) -> None:
    profile = {
        "transient_rate": 0.2,
        "permanent_rate": 0.02,
        "lost_response_rate": 0.05,
        "latency_ms": [0, 20],
        "seed": 5,
    }
    stack = Stack(tmp_path, agents=2, profile=profile, settings={"SAS_MAX_IN_FLIGHT": "60"}).start()
    try:
        ids = [f"e-{n:03d}" for n in range(200)]
        stack.submit([submission(i, app="app-a" if n % 2 else "app-b") for n, i in enumerate(ids)])
        records = stack.wait_terminal(ids, timeout=300)
        ledger = stack.ledger("e-")
    finally:
        codes = stack.stop()
    assert set(records) == set(ids)
    states = Counter(r.ProcessState for r in records.values())
    assert states[ProcessState.PROCESSED] > 150, states
    # Exactly once per step for processed orders, however many calls and lost responses it took;
    # net zero for compensated ones; no key called past the budget.
    failed = [
        check
        for check in effect_checks(ledger, records, int(stack.env["SAS_MAX_CALLS_PER_STEP"]))
        if not check.passed
    ]
    assert not failed, failed
    assert codes == {"simulator": 0, "devhost": 0, "agent-0": 0, "agent-1": 0}  # clean SIGTERM stops
    # Telemetry (C11): one order's spans from the Function App and from the agents share a trace.
    traces = {}
    for service in ("function-app", "agent"):
        spans = [json.loads(line) for line in (tmp_path / "telemetry" / f"{service}.spans.jsonl").open()]
        traces[service] = {
            s["context"]["trace_id"] for s in spans if s["attributes"].get("sas.order_id") == "e-000"
        }
    assert len(traces["function-app"]) == 1 and traces["function-app"] == traces["agent"]


@pytest.mark.slow
def test_under_a_total_outage_no_order_exceeds_its_retry_budget(tmp_path: Path) -> None:
    stack = Stack(tmp_path, agents=2, profile={"outage": True}).start()
    try:
        ids = [f"x-{n}" for n in range(4)]
        stack.submit([submission(i) for i in ids])
        records = stack.wait_terminal(ids, timeout=180)
        ledger = stack.ledger("x-")
    finally:
        stack.stop()
    budget = int(stack.env["SAS_MAX_CALLS_PER_STEP"])
    for order_id in ids:
        record = records[order_id]
        assert record.ProcessState is ProcessState.ERROR
        assert record.FailedStep == "ReserveInventory"
        calls = ledger.get(f"{order_id}:ReserveInventory", {}).get("calls", 0)
        assert 0 < calls <= budget, (order_id, calls, budget)
        assert record.RetryBudget.used("ReserveInventory") <= budget
        assert effects(ledger, order_id, "ReserveInventory") == 0
