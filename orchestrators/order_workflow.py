"""The first engine of the Scheduler, kept for the instances it started (C7): one orchestration
per attempt, with one activity per action. New attempts run ``orchestrators.order_attempt``,
which does the same work in a third of the round trips; this module and the activities only it
calls are removed once no ``order_workflow_v*`` instance is left (``ops list --state Processing``
shows none whose InstanceID started before the deployment).

The Scheduler (R1, E5-E12): one orchestration instance per attempt of one order.

Deterministic by construction: every read and write happens in an activity; time comes from
``CompleteBy`` values the activities return and from ``context.current_utc_datetime``; no
randomness. A version of the workflow is a step list in ``domain.workflow``; this generator runs
any of them, and each version is registered under its own orchestrator name (C7).

What ends an attempt early, leaving the record for the Supervisor (R5, E10, E11):
- the durable timer at ``CompleteBy`` fires before the Agent replies;
- the Agent replies that it ran out of attempts on transient faults;
- a fenced activity reports that a newer attempt owns the record (E5).
"""

from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.ids import request_message_id
from domain.workflow import Ending, Runs, Step, Workflow
from orchestrators.order_attempt import call, wait_for_reply


@dataclass(frozen=True)
class StepOutcome:
    ending: Ending | None  # None: the step succeeded
    error: str | None = None
    failed: bool = False  # a permanent failure: compensate


OK = StepOutcome(None)

Orchestration = Generator[Any, Any, str]

# What this engine registers in function_app.py, all to be removed together.
ORCHESTRATORS = ("order_workflow_v1", "order_workflow_v2")
ACTIVITIES = ("read_order", "begin_step", "send_agent_request", "record_step", "run_local_step", "finish")


def finish(
    context: Any, attempt: dict[str, str], outcome: str, error: str | None = None
) -> Generator[Any, Any, dict[str, Any]]:
    """The attempt's last write, then its status message and alert.

    If the write landed and a notification did not, the repeat finds the record finished by
    this attempt and sends them again (their MessageIds drop duplicates).
    """
    payload = {**attempt, "Outcome": outcome, "Error": error}
    result: dict[str, Any] = yield from call(context, "finish", payload)
    return result


def run_workflow(context: Any, workflow: Workflow) -> Orchestration:
    attempt = {"OrderID": context.get_input()["OrderID"], "InstanceID": context.instance_id}
    start = yield from call(context, "read_order", attempt)
    if start["Fenced"]:
        return Ending.FENCED.value
    if start["Missing"]:
        finished = yield from finish(
            context, attempt, "fail", "the order is missing from the orders database"
        )
        return Ending.FENCED.value if finished["Fenced"] else Ending.ERROR.value
    to_compensate = start["ToCompensate"]
    if not start["Compensating"]:
        done = list(start["CompletedSteps"])
        for step in workflow.steps:
            if step.name in done:
                continue
            outcome = yield from run_step(
                context, attempt, step, step.name, runs=step.runs, payload=start["Order"]
            )
            if outcome.ending is not None:
                return outcome.ending.value
            if outcome.failed:
                return (yield from handle_failure(context, attempt, workflow, done, outcome.error or ""))
            done.append(step.name)
        finished = yield from finish(context, attempt, "complete")
        return Ending.FENCED.value if finished["Fenced"] else Ending.PROCESSED.value
    return (yield from compensate(context, attempt, workflow, to_compensate))


def handle_failure(
    context: Any, attempt: dict[str, str], workflow: Workflow, done: list[str], error: str
) -> Orchestration:
    """A permanent failure: undo what was done, newest first (R9), or stop in Error (E12).

    ``finish`` decides from the compensation log: it answers Compensating when anything logged
    may need undoing, Error otherwise.
    """
    finished = yield from finish(context, attempt, "fail", error)
    if finished["Fenced"]:
        return Ending.FENCED.value
    if finished["State"] == "Compensating":
        return (yield from compensate(context, attempt, workflow, finished["ToCompensate"]))
    return Ending.ERROR.value


def compensate(
    context: Any, attempt: dict[str, str], workflow: Workflow, to_compensate: list[dict[str, Any]]
) -> Orchestration:
    for entry in to_compensate:
        step = workflow.step(entry["Step"])
        outcome = yield from run_step(
            context, attempt, step, entry["Action"], runs=step.compensation_runs, payload=entry["Data"]
        )
        if outcome.ending is not None:
            return outcome.ending.value
        if outcome.failed:
            finished = yield from finish(context, attempt, "compensation_failed", outcome.error)
            return Ending.FENCED.value if finished["Fenced"] else Ending.COMPENSATION_FAILED.value
    finished = yield from finish(context, attempt, "compensated")
    return Ending.FENCED.value if finished["Fenced"] else Ending.COMPENSATED.value


def run_step(
    context: Any, attempt: dict[str, str], step: Step, action: str, *, runs: Runs, payload: Any
) -> Generator[Any, Any, StepOutcome]:
    work = {**attempt, "Step": step.name, "Action": action}
    if runs is Runs.LOCAL:
        result = yield from call(context, "run_local_step", {**work, "Order": payload})
        if result["Fenced"]:
            return StepOutcome(Ending.FENCED)
        if result.get("Error"):
            return StepOutcome(None, result["Error"], failed=True)
        return OK
    return (yield from run_agent_step(context, work, payload))


def run_agent_step(context: Any, work: dict[str, Any], payload: Any) -> Generator[Any, Any, StepOutcome]:
    begun = yield from call(context, "begin_step", work)
    if begun["Fenced"]:
        return StepOutcome(Ending.FENCED)
    if begun["Exhausted"]:
        return StepOutcome(None, begun["Error"], failed=True)
    yield from call(
        context,
        "send_agent_request",
        {**work, "CompleteBy": begun["CompleteBy"], "MaxAttempts": begun["CallsGranted"], "Payload": payload},
    )
    request_id = request_message_id(work["InstanceID"], work["Action"])
    reply = yield from wait_for_reply(context, request_id, datetime.fromisoformat(begun["CompleteBy"]))
    if reply is None:
        return StepOutcome(Ending.TIMED_OUT)  # R5: stop waiting, leave the record alone
    if reply["Outcome"] == "ok":
        recorded = yield from call(context, "record_step", {**work, "Result": reply.get("Result") or {}})
        return StepOutcome(Ending.FENCED) if recorded["Fenced"] else OK
    if reply["Outcome"] == "permanent":
        return StepOutcome(None, f"{work['Action']}: {reply.get('Error')}", failed=True)
    return StepOutcome(Ending.RETRY_LATER)
