"""The Durable Functions wire format: what the Durable SDK reads and writes, as JSON.

History events as the Durable extension serialises them (``EventType``, ``Timestamp``,
``IsPlayed``...), the out-of-proc orchestration context they are sent in, the actions an
orchestrator's state JSON asks for, and the runtime statuses of the Durable HTTP API.

Stored history is this JSON text, and replays splice it into the context unparsed: any change to
how an event is written (key order, spacing, the timestamp format) changes what existing
instances replay. Nothing here touches SQLite or the clock.
"""

import functools
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from typing import Any

OUT_OF_PROC_MARKER = "$OutOfProcData$:"
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


class EventType(IntEnum):
    EXECUTION_STARTED = 0
    EXECUTION_COMPLETED = 1
    EXECUTION_TERMINATED = 3
    TASK_SCHEDULED = 4
    TASK_COMPLETED = 5
    TASK_FAILED = 6
    SUB_ORCHESTRATION_INSTANCE_CREATED = 7
    SUB_ORCHESTRATION_INSTANCE_COMPLETED = 8
    SUB_ORCHESTRATION_INSTANCE_FAILED = 9
    TIMER_CREATED = 10
    TIMER_FIRED = 11
    ORCHESTRATOR_STARTED = 12
    ORCHESTRATOR_COMPLETED = 13
    EVENT_RAISED = 15


class ActionType(IntEnum):
    CALL_ACTIVITY = 0
    CALL_ACTIVITY_WITH_RETRY = 1
    CALL_SUB_ORCHESTRATOR = 2
    CALL_SUB_ORCHESTRATOR_WITH_RETRY = 3
    CONTINUE_AS_NEW = 4
    CREATE_TIMER = 5
    WAIT_FOR_EXTERNAL_EVENT = 6
    CALL_ENTITY = 7
    CALL_HTTP = 8
    SIGNAL_ENTITY = 9
    WHEN_ANY = 11
    WHEN_ALL = 12


class RuntimeStatus(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    TERMINATED = "Terminated"


FINISHED = frozenset({RuntimeStatus.COMPLETED, RuntimeStatus.FAILED, RuntimeStatus.TERMINATED})


def _format_time(moment: datetime) -> str:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: devhost's Durable store works in UTC only")
    return moment.astimezone(UTC).strftime(_TIME_FORMAT)


# Fixed width, UTC, ``Z``: stored times sort as strings. One transaction stamps many rows with the
# same moment: each moment is formatted once.
format_time = functools.lru_cache(maxsize=256)(_format_time)


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def parse_fire_at(text: str) -> datetime:
    """A timer action's ``fireAt``, as the SDK writes it (ISO 8601, ``Z`` or an offset, or naive UTC)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def new_event(kind: EventType, when: datetime, **fields: Any) -> dict[str, Any]:
    """A history event, unplayed. ``EventType`` is its first key and ``IsPlayed`` its third:
    ``event_text``, ``as_played`` and ``is_scheduling`` rely on both."""
    return {
        "EventType": int(kind),
        "EventId": -1,
        "IsPlayed": False,
        "Timestamp": format_time(when),
        **fields,
    }


def event_text(event: dict[str, Any]) -> str:
    """An event's JSON text: what the history stores and what a replay's context splices in."""
    return json.dumps(event)


_UNPLAYED = '"IsPlayed": false'
_PLAYED = '"IsPlayed": true'
# The events a replay's actions are checked against, picked out of the history without parsing it.
_SCHEDULING = tuple(
    f'{{"EventType": {int(kind)},'
    for kind in (
        EventType.TASK_SCHEDULED,
        EventType.TIMER_CREATED,
        EventType.SUB_ORCHESTRATION_INSTANCE_CREATED,
    )
)


def as_played(text: str) -> str:
    """A stored event, as a later replay sees it. Stored events were new when written; the flag is
    the third key of every event, so a plain replace touches nothing inside inputs."""
    return text.replace(_UNPLAYED, _PLAYED, 1)


def is_scheduling(text: str) -> bool:
    """Whether a stored event records an activity, a timer or a sub-orchestration the
    orchestrator asked for: each took a task ID."""
    return text.startswith(_SCHEDULING)


def flatten_actions(actions: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The actions of a state JSON's action list, ``when_any`` / ``when_all`` groups opened."""
    for action in actions:
        if action.get("actionType") in (ActionType.WHEN_ANY, ActionType.WHEN_ALL):
            yield from flatten_actions(action.get("compoundActions", []))
        else:
            yield action


def split_orchestrator_error(text: str) -> tuple[str, dict[str, Any] | None]:
    """An orchestrator that raises comes back with the state JSON after a marker in its message."""
    if OUT_OF_PROC_MARKER not in text:
        return text, None
    message, _, state = text.partition(OUT_OF_PROC_MARKER)
    return message.strip(), json.loads(state)


def context_fields(
    instance_id: str, input_json: str | None, *, is_replaying: bool, parent_instance_id: str | None = None
) -> dict[str, Any]:
    """The out-of-proc orchestration context the Durable extension sends, but for its history."""
    return {
        "instanceId": instance_id,
        "isReplaying": is_replaying,
        "parentInstanceId": parent_instance_id,
        "input": input_json,
        "upperSchemaVersion": 2,
        "upperSchemaVersionNew": 3,
        # The Azure Storage provider's limits: timers up to 6 days are single timers.
        "maximumShortTimerDuration": "6.00:00:00",
        "longRunningTimerIntervalDuration": "3.00:00:00",
    }


def orchestration_context(history: list[str], fields: dict[str, Any]) -> str:
    """The context JSON, its history spliced in as the events' JSON texts (not parsed again)."""
    return '{"history": [' + ", ".join(history) + "], " + json.dumps(fields)[1:]


def parse_token(text: Any) -> Any:
    """``DurableClient.ParseToJToken``: JSON text as its value, other text as it is."""
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if not stripped:
        return ""
    try:
        return json.loads(stripped)
    except ValueError:
        return text


def project_history(texts: list[str], *, show_output: bool, show_input: bool) -> list[dict[str, Any]]:
    """A history as ``DurableClient.GetDurableOrchestrationStatusAsync`` shows it with
    ``showHistory``: string ``EventType``s; each completion or failure carries its scheduling
    event's ``FunctionName``, ``ScheduledTime`` (and ``Input``), and the scheduling event and the
    OrchestratorStarted/Completed markers are dropped; results only with ``showHistoryOutput``;
    no ``EventId`` or ``IsPlayed``."""
    events: list[dict[str, Any]] = [json.loads(text) for text in texts]
    scheduled: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}
    dropped: set[int] = set()
    for index, event in enumerate(events):
        kind = _KINDS.get(int(event["EventType"]))
        if kind is None:
            continue
        event["EventType"] = _EVENT_NAMES[kind]
        if kind in (EventType.TASK_SCHEDULED, EventType.SUB_ORCHESTRATION_INSTANCE_CREATED):
            scheduled[(event["EventType"], event["EventId"])] = (index, dict(event))
            event.pop("Version", None)
        elif kind in _COMPLETIONS:
            origin = scheduled.get((_COMPLETIONS[kind], event.get("TaskScheduledId", -1)))
            if origin is not None:
                dropped.add(origin[0])
            _project_completion(event, kind, None if origin is None else origin[1], show_output, show_input)
        elif kind in (EventType.ORCHESTRATOR_STARTED, EventType.ORCHESTRATOR_COMPLETED):
            dropped.add(index)
        else:
            _project_other(event, kind, show_output)
        if not show_input:
            event.pop("Input", None)
        event.pop("EventId", None)
        event.pop("IsPlayed", None)
    return [event for index, event in enumerate(events) if index not in dropped]


def _project_completion(
    event: dict[str, Any],
    kind: EventType,
    origin: dict[str, Any] | None,
    show_output: bool,
    show_input: bool,
) -> None:
    if origin is not None:
        event["ScheduledTime"] = origin["Timestamp"]
        event["FunctionName"] = origin.get("Name")
        if show_input:
            event["Input"] = origin.get("Input")
    event.pop("TaskScheduledId", None)
    if kind not in (EventType.TASK_COMPLETED, EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED):
        return
    if show_output:
        event["Result"] = parse_token(event.get("Result"))
    else:
        event.pop("Result", None)


def _project_other(event: dict[str, Any], kind: EventType, show_output: bool) -> None:
    if kind == EventType.EXECUTION_STARTED:
        event["FunctionName"] = event.pop("Name", None)
        for key in ("OrchestrationInstance", "ParentInstance", "Version", "Tags"):
            event.pop(key, None)
    elif kind == EventType.EXECUTION_COMPLETED:
        if show_output:
            event["Result"] = parse_token(event.get("Result"))
        else:
            event.pop("Result", None)
    elif kind == EventType.TIMER_FIRED:
        event.pop("TimerId", None)


# DurableTask.Core's EventType names, as ``EventType.ToString()`` writes them.
_EVENT_NAMES = {
    EventType.EXECUTION_STARTED: "ExecutionStarted",
    EventType.EXECUTION_COMPLETED: "ExecutionCompleted",
    EventType.EXECUTION_TERMINATED: "ExecutionTerminated",
    EventType.TASK_SCHEDULED: "TaskScheduled",
    EventType.TASK_COMPLETED: "TaskCompleted",
    EventType.TASK_FAILED: "TaskFailed",
    EventType.SUB_ORCHESTRATION_INSTANCE_CREATED: "SubOrchestrationInstanceCreated",
    EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED: "SubOrchestrationInstanceCompleted",
    EventType.SUB_ORCHESTRATION_INSTANCE_FAILED: "SubOrchestrationInstanceFailed",
    EventType.TIMER_CREATED: "TimerCreated",
    EventType.TIMER_FIRED: "TimerFired",
    EventType.ORCHESTRATOR_STARTED: "OrchestratorStarted",
    EventType.ORCHESTRATOR_COMPLETED: "OrchestratorCompleted",
    EventType.EVENT_RAISED: "EventRaised",
}
_KINDS = {int(kind): kind for kind in EventType}
_COMPLETIONS = {
    EventType.TASK_COMPLETED: "TaskScheduled",
    EventType.TASK_FAILED: "TaskScheduled",
    EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED: "SubOrchestrationInstanceCreated",
    EventType.SUB_ORCHESTRATION_INSTANCE_FAILED: "SubOrchestrationInstanceCreated",
}
