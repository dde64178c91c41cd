"""The Scheduler (R1, E5-E12): one orchestration instance per attempt of one order.

Deterministic by construction: every read and write happens in an activity; time comes from
``CompleteBy`` values the activities return and from ``context.current_utc_datetime``; no
randomness. A version of the workflow is a step list in ``domain.workflow``; this generator runs
any of them, and each version is registered under its own orchestrator name (C7).

What ends an attempt early, leaving the record for the Supervisor (R5, E10, E11):
- the durable timer at ``CompleteBy`` fires before the Agent replies;
- the Agent replies that it ran out of attempts on transient faults;
- a fenced activity reports that a newer attempt owns the record (E5).
"""

import warnings
from collections.abc import Generator
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from domain.ids import request_message_id
from domain.workflow import Runs, Step, Workflow

# A reply nobody waits for (stray, duplicate, late) is buffered by the Durable SDK, which warns on
# every replay of that episode; here that is the design, not a fault (see agent_event).
warnings.filterwarnings("ignore", message=r"Potential duplicate Task completion for TaskId: AgentReply\.")


class Ending(StrEnum):
    PROCESSED = "processed"
    ERROR = "error"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation-failed"
    FENCED = "fenced"  # a newer attempt owns the record: nothing more to do here
    TIMED_OUT = "timed-out"  # CompleteBy passed: the Supervisor takes over
    RETRY_LATER = "retry-later"  # transient faults outlasted the Agent's attempts: likewise
    NO_ORDER = "no-order"


@dataclass(frozen=True)
class StepOutcome:
    ending: Ending | None  # None: the step succeeded
    error: str | None = None
    failed: bool = False  # a permanent failure: compensate


OK = StepOutcome(None)

Orchestration = Generator[Any, Any, str]


# A failed activity is called again after these waits (durable timers), then the failure ends
# the orchestration. An activity fails when a store or the bus stayed down for its whole retry
# budget (SAS_RETRY_BUDGET_SECONDS): these waits span about a minute more, the order of a step's
# window; an outage longer than that is the Supervisor's, which recovers the expired record (R7).
# Every activity is safe to repeat: fenced writes, keyed inserts, sends with stable MessageIds.
ACTIVITY_RETRY_DELAYS = tuple(timedelta(seconds=s) for s in (2, 4, 8, 16, 32))


def call(context: Any, name: str, payload: dict[str, Any]) -> Generator[Any, Any, Any]:
    """``context.call_activity(name, payload)``, retried on failure after ACTIVITY_RETRY_DELAYS.

    The happy path's history is exactly one TaskScheduled and one TaskCompleted, as without it.
    """
    for delay in ACTIVITY_RETRY_DELAYS:
        try:
            return (yield context.call_activity(name, payload))
        except Exception:  # noqa: BLE001 - the Durable SDK raises a failed activity as a bare Exception
            yield context.create_timer(context.current_utc_datetime + delay)
    return (yield context.call_activity(name, payload))


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


def agent_event(request_id: str) -> str:
    """The event a reply is raised as, named by the request it answers (E8).

    Only the reply to this request can end this wait: a stray, late or duplicate reply to any
    other request is raised under another name that nothing waits for, so it stays inert. (The
    Durable SDK keeps an unconsumed event per name and hands it to every later wait of that
    name, azure-functions-durable-python#507, so a name shared by several waits is not safe.)
    The ``:`` of a request ID becomes ``.``: the name travels unescaped in the Durable HTTP
    API's URL path.
    """
    return "AgentReply." + request_id.replace(":", ".")


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


def wait_for_reply(
    context: Any, request_id: str, complete_by: datetime
) -> Generator[Any, Any, dict[str, Any] | None]:
    """The reply to our request, or None when ``CompleteBy`` comes first (E8, E10)."""
    timer = context.create_timer(complete_by)
    reply_task = context.wait_for_external_event(agent_event(request_id))
    winner = yield context.task_any([reply_task, timer])
    if winner is timer:
        return None
    timer.cancel()  # an uncancelled timer would keep the instance alive until CompleteBy
    reply = reply_task.result
    return reply if isinstance(reply, dict) and reply.get("RequestID") == request_id else None


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
