"""Durable Task Scheduler actions per order, from the Durable work each kind of order does.

    .venv/bin/python -m harness.bench.dts_actions

The Consumption SKU bills per action: an orchestration start is 1, an activity 2 (scheduling it
and processing its result), a timer 1 (completing it) and an external event 1
(learn.microsoft.com, durable-task-scheduler-dedicated-sku, "What is an action?"). The work per
order follows from the orchestrator (``orchestrators/order_attempt.py``): one ``advance``
activity per wait plus one, and each wait for the Agent is a durable timer at ``CompleteBy`` raced
against the reply, an external event. The waits come from the sample workflow's Agent steps
(``domain/sample_workflow.py``). ``harness.bench.ops_per_order`` measures the happy path's 3 activities
per order; ``tests/iac/test_dts_actions.py`` ties both, and docs/deploying.md's table, to this.

A cancelled timer (the reply won) is counted as completing: it still fires at ``CompleteBy`` on
an orchestration that has finished, so this is the upper bound.
"""

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from domain.sample_workflow import ORDER_WORKFLOW_V1  # noqa: E402
from domain.workflow import Runs  # noqa: E402

ACTIONS = {"orchestration start": 1, "activity": 2, "timer": 1, "external event": 1}


@dataclass(frozen=True)
class DurableWork:
    """The Durable work of one order, summed over its attempts (orchestration instances)."""

    starts: int
    activities: int
    timers: int
    events: int

    @property
    def actions(self) -> int:
        return (
            self.starts * ACTIONS["orchestration start"]
            + self.activities * ACTIONS["activity"]
            + self.timers * ACTIONS["timer"]
            + self.events * ACTIONS["external event"]
        )


def attempt(waits: int, replies: int) -> DurableWork:
    """One orchestration instance: ``advance`` once, then once after each reply; each wait a timer."""
    return DurableWork(starts=1, activities=1 + replies, timers=waits, events=replies)


def combined(*parts: DurableWork) -> DurableWork:
    return DurableWork(
        *(sum(getattr(p, f) for p in parts) for f in ("starts", "activities", "timers", "events"))
    )


def per_order() -> dict[str, DurableWork]:
    """The happy path; a compensated order (the last local step fails after every Agent step
    succeeded, so every Agent step is undone, newest first, each a request and a reply); and a
    recovered order (the first Agent reply never comes: the attempt ends at CompleteBy, and the
    Supervisor's second attempt resends it and runs the order to the end)."""
    agent_steps = sum(1 for step in ORDER_WORKFLOW_V1.steps if step.runs is Runs.AGENT)
    undoable = sum(
        1 for step in ORDER_WORKFLOW_V1.steps if step.compensation and step.compensation_runs is Runs.AGENT
    )
    return {
        "happy path": attempt(waits=agent_steps, replies=agent_steps),
        "compensated": attempt(waits=agent_steps + undoable, replies=agent_steps + undoable),
        "recovered": combined(attempt(waits=1, replies=0), attempt(waits=agent_steps, replies=agent_steps)),
    }


def table() -> str:
    """The Markdown table docs/deploying.md holds (the test compares them)."""
    lines = [
        "| order | starts | activities | timers | external events | DTS actions |",
        "|---|---|---|---|---|---|",
    ]
    for kind, work in per_order().items():
        lines.append(
            f"| {kind} | {work.starts} | {work.activities} | {work.timers} | {work.events} | {work.actions} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
