"""The Scheduler (R1, E5-E12): one orchestration instance per attempt of one order.

The orchestrator only waits: everything between two waits is one ``advance`` activity, which
records the step a reply answers, runs local steps, begins the next Agent step and sends its
request, or finishes (``activities/steps.py``). Each round trip through an orchestrator
replays its whole history, so one that carries no decision is pure cost: the happy path of the
sample workflow is 3 activities and 6 episodes, where one activity per action made 10 and 11.

Deterministic by construction: every read and write happens in the activity; time comes from
the ``CompleteBy`` it returns and from ``context.current_utc_datetime``; the nonce of each request
from ``context.new_uuid()`` and the salt in the orchestration's input, both the same on replay.
The workflow version is the record's, read by the activity: this code is the same for every
version.

What ends an attempt early, leaving the record for the Supervisor (R5, E10, E11):
- the durable timer at ``CompleteBy`` fires before the Agent replies;
- the Agent replies that it ran out of attempts on transient faults;
- the activity reports that a newer attempt owns the record (E5).
"""

import warnings
from collections.abc import Generator
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from contracts.activities import ADVANCE, ActivityContract, AttemptInput, OrchestratorInput
from domain.ids import reply_event, request_nonce
from domain.messages import AgentOutcome, AgentReply
from domain.workflow import Ending

# A reply nobody waits for (stray, duplicate, late, forged) is buffered by the Durable SDK, which
# warns on every replay of that episode; here that is the design, not a fault (see agent_event).
warnings.filterwarnings("ignore", message=r"Potential duplicate Task completion for TaskId: AgentReply\.")


# A failed activity is called again after these waits (durable timers), then the failure ends
# the orchestration. An activity fails when a store or the bus stayed down for its whole retry
# budget (SAS_RETRY_BUDGET_SECONDS): these waits span about a minute more, the order of a step's
# window; an outage longer than that is the Supervisor's, which recovers the expired record (R7).
# Every activity is safe to repeat: fenced writes, keyed inserts, sends with stable MessageIds.
ACTIVITY_RETRY_DELAYS = tuple(timedelta(seconds=s) for s in (2, 4, 8, 16, 32))


def call[I: AttemptInput, R](
    context: Any, activity: ActivityContract[I, R], work: I
) -> Generator[Any, Any, R]:
    """The activity called with ``work``, retried on failure after ACTIVITY_RETRY_DELAYS; its
    result parsed.

    What goes over the Durable boundary is the input's JSON object, never the model. The happy
    path's history is exactly one TaskScheduled and one TaskCompleted, as without retries.
    """
    result = yield from _call_with_retries(context, activity.name.value, work.wire())
    return activity.read_result(result)


def _call_with_retries(context: Any, name: str, payload: dict[str, Any]) -> Generator[Any, Any, Any]:
    for delay in ACTIVITY_RETRY_DELAYS:
        try:
            return (yield context.call_activity(name, payload))
        except Exception:  # noqa: BLE001 - the Durable SDK raises a failed activity as a bare Exception
            yield context.create_timer(context.current_utc_datetime + delay)
    return (yield context.call_activity(name, payload))


def agent_event(request_id: str) -> str:
    """The event a reply is raised as, named by the request it answers (E8): see
    ``domain.ids.reply_event``, which the reply listener uses too."""
    return reply_event(request_id)


def next_nonce(context: Any, salt: str | None) -> str:
    """The nonce for the request the next ``advance`` may send. Made here, not in the activity,
    so that a repeat of the activity sends the same request; replay-safe, since ``new_uuid``
    gives the same values in the same order on every replay (it writes nothing to the history,
    so a history recorded before nonces replays unchanged)."""
    return request_nonce(context.new_uuid(), salt)


def _as_reply(raised: object) -> AgentReply:
    """The event as the Durable extension delivers it. The SDK's ``raise_event`` JSON-encodes its
    data twice (azure-functions-durable-python#295) and the extension stores the body as it
    parsed it, so what ``agent_reply`` raised arrives as JSON text; an event raised with an
    object (another client, an older history) arrives as that object."""
    if isinstance(raised, str):
        return AgentReply.model_validate_json(raised)
    return AgentReply.model_validate(raised)


def wait_for_reply(
    context: Any, request_id: str, complete_by: datetime
) -> Generator[Any, Any, AgentReply | None]:
    """The reply to our request, or None when ``CompleteBy`` comes first (E8, E10) — or when
    what came is not a reply to it."""
    timer = context.create_timer(complete_by)
    reply_task = context.wait_for_external_event(agent_event(request_id))
    winner = yield context.task_any([reply_task, timer])
    if winner is timer:
        return None
    timer.cancel()  # an uncancelled timer would keep the instance alive until CompleteBy
    try:
        reply = _as_reply(reply_task.result)
    except ValidationError:
        return None
    return reply if reply.RequestID == request_id else None


Orchestration = Generator[Any, Any, str]


def run_attempt(context: Any) -> Orchestration:
    given = OrchestratorInput.model_validate(context.get_input())
    attempt = AttemptInput(OrderID=given.OrderID, InstanceID=context.instance_id)
    start = attempt.starting(next_nonce(context, given.Salt))
    result = yield from call(context, ADVANCE, start)
    while (request := result.Wait) is not None:
        # The wait is named by the RequestID the activity sent, which history keeps: a request
        # sent before nonces is waited for under its legacy name, as it was when it went out.
        reply = yield from wait_for_reply(context, request.RequestID, request.CompleteBy)
        if reply is None:
            return Ending.TIMED_OUT.value  # R5: stop waiting, leave the record alone
        if reply.Outcome is AgentOutcome.TRANSIENT_EXHAUSTED:
            return Ending.RETRY_LATER.value  # the Supervisor retries the step when CompleteBy passes
        replied = attempt.answering(request, reply, next_nonce(context, given.Salt))
        result = yield from call(context, ADVANCE, replied)
    return str(result.Ending)  # no Wait: an Ending (AdvanceResult holds one or the other)
