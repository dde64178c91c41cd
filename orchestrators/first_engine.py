"""The first engine of the Scheduler, kept for the instances it started (C7): one orchestration
per attempt, with one activity per action. New attempts run ``orchestrators.order_attempt``,
which does the same work in a third of the round trips. Its functions are registered as one
blueprint (``first_engine_blueprint.py``); this module goes with it once no ``order_workflow_v*``
instance is left (docs/operating.md "Retiring the first engine").

The Scheduler (R1, E5-E12): one orchestration instance per attempt of one order.

Deterministic by construction: every read and write happens in an activity; time comes from
``CompleteBy`` values the activities return and from ``context.current_utc_datetime``; no
randomness. A version of the workflow is a step list (``domain.sample_workflow``); this generator runs
any of them, and each version is registered under its own orchestrator name (C7).

What ends an attempt early, leaving the record for the Supervisor (R5, E10, E11):
- the durable timer at ``CompleteBy`` fires before the Agent replies;
- the Agent replies that it ran out of attempts on transient faults;
- a fenced activity reports that a newer attempt owns the record (E5).
"""

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from contracts.activities import (
    BEGIN_STEP,
    FINISH,
    READ_ORDER,
    RECORD_STEP,
    RUN_LOCAL_STEP,
    SEND_AGENT_REQUEST,
    AttemptInput,
    Compensation,
    FinishOutcome,
    FinishResult,
    OrchestratorInput,
    StepInput,
)
from contracts.names import Activity, orchestrator_name
from domain.ids import request_message_id
from domain.messages import AgentOutcome
from domain.sample_workflow import ORDER_WORKFLOW_V1, ORDER_WORKFLOW_V2
from domain.states import ProcessState
from domain.workflow import Ending, Runs, Step, Workflow
from orchestrators.order_attempt import call, wait_for_reply


@dataclass(frozen=True)
class StepOutcome:
    ending: Ending | None  # None: the step succeeded
    error: str | None = None
    failed: bool = False  # a permanent failure: compensate


OK = StepOutcome(None)

Orchestration = Generator[Any, Any, str]

# What this engine registers (first_engine_blueprint.py), all to be removed together: an orchestrator for
# each version it ran, and its activities.
WORKFLOWS = (ORDER_WORKFLOW_V1, ORDER_WORKFLOW_V2)
ORCHESTRATORS = tuple(orchestrator_name(w.version) for w in WORKFLOWS)
ACTIVITIES = (
    Activity.READ_ORDER,
    Activity.BEGIN_STEP,
    Activity.SEND_AGENT_REQUEST,
    Activity.RECORD_STEP,
    Activity.RUN_LOCAL_STEP,
    Activity.FINISH,
)


def finish(
    context: Any, attempt: AttemptInput, outcome: FinishOutcome, error: str | None = None
) -> Generator[Any, Any, FinishResult]:
    """The attempt's last write, then its status message and alert.

    If the write landed and a notification did not, the repeat finds the record finished by
    this attempt and sends them again (their MessageIds drop duplicates).
    """
    return (yield from call(context, FINISH, attempt.finishing(outcome, error)))


def run_workflow(context: Any, workflow: Workflow) -> Orchestration:
    order_id = OrchestratorInput.model_validate(context.get_input()).OrderID
    attempt = AttemptInput(OrderID=order_id, InstanceID=context.instance_id)
    start = yield from call(context, READ_ORDER, attempt)
    if start.Fenced:
        return Ending.FENCED.value
    if start.Missing:
        finished = yield from finish(
            context, attempt, FinishOutcome.FAIL, "the order is missing from the orders database"
        )
        return Ending.FENCED.value if finished.Fenced else Ending.ERROR.value
    if not start.Compensating:
        if start.Order is None:
            raise ValueError("read_order answered neither Missing nor the order")
        order = start.Order.wire()
        done = list(start.CompletedSteps)
        for step in workflow.steps:
            if step.name in done:
                continue
            outcome = yield from run_step(context, attempt, step, step.name, runs=step.runs, payload=order)
            if outcome.ending is not None:
                return outcome.ending.value
            if outcome.failed:
                return (yield from handle_failure(context, attempt, workflow, done, outcome.error or ""))
            done.append(step.name)
        finished = yield from finish(context, attempt, FinishOutcome.COMPLETE)
        return Ending.FENCED.value if finished.Fenced else Ending.PROCESSED.value
    return (yield from compensate(context, attempt, workflow, start.ToCompensate))


def handle_failure(
    context: Any, attempt: AttemptInput, workflow: Workflow, done: list[str], error: str
) -> Orchestration:
    """A permanent failure: undo what was done, newest first (R9), or stop in Error (E12).

    ``finish`` decides from the compensation log: it answers Compensating when anything logged
    may need undoing, Error otherwise.
    """
    finished = yield from finish(context, attempt, FinishOutcome.FAIL, error)
    if finished.Fenced:
        return Ending.FENCED.value
    if finished.State is ProcessState.COMPENSATING:
        return (yield from compensate(context, attempt, workflow, finished.ToCompensate))
    return Ending.ERROR.value


def compensate(
    context: Any, attempt: AttemptInput, workflow: Workflow, to_compensate: list[Compensation]
) -> Orchestration:
    for entry in to_compensate:
        step = workflow.step(entry.Step)
        outcome = yield from run_step(
            context, attempt, step, entry.Action, runs=step.compensation_runs, payload=dict(entry.Data)
        )
        if outcome.ending is not None:
            return outcome.ending.value
        if outcome.failed:
            finished = yield from finish(context, attempt, FinishOutcome.COMPENSATION_FAILED, outcome.error)
            return Ending.FENCED.value if finished.Fenced else Ending.COMPENSATION_FAILED.value
    finished = yield from finish(context, attempt, FinishOutcome.COMPENSATED)
    return Ending.FENCED.value if finished.Fenced else Ending.COMPENSATED.value


def run_step(
    context: Any, attempt: AttemptInput, step: Step, action: str, *, runs: Runs, payload: dict[str, Any]
) -> Generator[Any, Any, StepOutcome]:
    work = attempt.for_step(step.name, action)
    if runs is Runs.LOCAL:
        result = yield from call(context, RUN_LOCAL_STEP, work.running_locally(payload))
        if result.Fenced:
            return StepOutcome(Ending.FENCED)
        if result.Error:
            return StepOutcome(None, result.Error, failed=True)
        return OK
    return (yield from run_agent_step(context, work, payload))


def run_agent_step(
    context: Any, work: StepInput, payload: dict[str, Any]
) -> Generator[Any, Any, StepOutcome]:
    begun = yield from call(context, BEGIN_STEP, work)
    if begun.Fenced:
        return StepOutcome(Ending.FENCED)
    if begun.Exhausted:
        return StepOutcome(None, begun.Error, failed=True)
    complete_by, calls = begun.grant()
    yield from call(context, SEND_AGENT_REQUEST, work.requesting(complete_by, calls, payload))
    request_id = request_message_id(work.InstanceID, work.Action)
    reply = yield from wait_for_reply(context, request_id, complete_by)
    if reply is None:
        return StepOutcome(Ending.TIMED_OUT)  # R5: stop waiting, leave the record alone
    if reply.Outcome is AgentOutcome.OK:
        recorded = yield from call(context, RECORD_STEP, work.recording(reply.Result or {}))
        return StepOutcome(Ending.FENCED) if recorded.Fenced else OK
    if reply.Outcome is AgentOutcome.PERMANENT:
        return StepOutcome(None, f"{work.Action}: {reply.Error}", failed=True)
    return StepOutcome(Ending.RETRY_LATER)
