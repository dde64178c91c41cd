"""Replay a recorded history through today's orchestrator code, offline, and say whether it
still makes the same decisions (the pattern's C7).

The orchestrator runs as the worker runs it: the handle the Durable SDK's decorator registers
in ``function_app.py`` (``Orchestrator.create``, the SDK's TaskOrchestrationExecutor), given the
out-of-proc context devhost builds (``harness.devhost.durable_wire``) with the whole history in it. The
state it returns lists every action it asked for since the start. The Durable runtime (DTFx)
checks those against the history as devhost's engine does (``durable_engine._Plan``): the n-th
activity, timer or sub-orchestration asked for must be the n-th one the history scheduled, of
the same kind and name. The first that differs is the change that would break an instance in
flight: DTFx fails it with "Non-deterministic workflow detected". Inputs are not compared,
as DTFx does not compare them.
"""

import functools
import importlib.util
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.devhost.durable_wire import (
    ActionType,
    EventType,
    context_fields,
    event_text,
    flatten_actions,
    orchestration_context,
    split_orchestrator_error,
)
from ops.replay_history import RecordedHistory

# What the worker calls: the SDK's handle, on the context JSON; the state JSON back.
Handle = Callable[[str], str]

_SCHEDULING = {
    EventType.TASK_SCHEDULED: "activity",
    EventType.TIMER_CREATED: "timer",
    EventType.SUB_ORCHESTRATION_INSTANCE_CREATED: "sub-orchestration",
}
_ACTIONS = {
    ActionType.CALL_ACTIVITY: "activity",
    ActionType.CALL_SUB_ORCHESTRATOR: "sub-orchestration",
    ActionType.CREATE_TIMER: "timer",
}
# Waits take no task ID and leave no scheduling event; continue-as-new ends the execution.
_UNRECORDED = frozenset({ActionType.WAIT_FOR_EXTERNAL_EVENT, ActionType.CONTINUE_AS_NEW})


@dataclass(frozen=True)
class Verdict:
    """One instance's replay: ``event`` is the first history event that no longer matches
    (its index in ``history``), ``expected`` what it recorded, ``produced`` what the code asks."""

    instance_id: str
    orchestrator: str
    deterministic: bool
    event: int | None = None
    expected: str | None = None
    produced: str | None = None
    error: str | None = None

    def describe(self) -> str:
        if self.deterministic:
            return f"{self.instance_id} ({self.orchestrator}): replays deterministically"
        if self.event is None:
            return f"{self.instance_id} ({self.orchestrator}): {self.error}"
        return (
            f"{self.instance_id} ({self.orchestrator}): history event {self.event} recorded "
            f"{self.expected}; the orchestrator now asks for {self.produced}"
            + (f" ({self.error})" if self.error else "")
        )


@functools.cache
def registered_orchestrators(app_dir: Path) -> dict[str, Handle]:
    """The orchestrator functions ``function_app.py`` in ``app_dir`` registers, by the name the
    task hub knows them by, each as the worker calls it. Loaded under a name of its own, once a
    process: the SDK's app hands out its functions once, and ``function_app`` in sys.modules
    may be another app's (devhost in process imports each app afresh under that name)."""
    spec = importlib.util.spec_from_file_location("replayed_function_app", app_dir / "function_app.py")
    if spec is None or spec.loader is None:
        raise ValueError(f"{app_dir} has no function_app.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(app_dir))  # the app's own packages, as the worker resolves them
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(app_dir))
    found: dict[str, Handle] = {}
    for function in module.app.get_functions():
        if function.get_trigger().type == "orchestrationTrigger":
            found[function.get_function_name()] = function.get_user_function()
    return found


def _label(kind: str, name: object) -> str:
    return kind if kind == "timer" else f"{kind} {json.dumps(name)}"


def _recorded(event: dict[str, Any]) -> str:
    return _label(_SCHEDULING[EventType(event["EventType"])], event.get("Name"))


def _asked(action: dict[str, Any]) -> str:
    kind = _ACTIONS.get(ActionType(action["actionType"]))
    if kind is None:
        return f"action {ActionType(action['actionType']).name}"
    return _label(kind, action.get("functionName"))


def _run(handle: Handle, recorded: RecordedHistory) -> tuple[dict[str, Any] | None, str | None]:
    # As a later episode sees it: every stored event already played.
    played = [event_text({**event, "IsPlayed": True}) for event in recorded.history]
    fields = context_fields(recorded.instanceId, recorded.input, is_replaying=True)
    try:
        return json.loads(handle(orchestration_context(played, fields))), None
    except Exception as raised:  # noqa: BLE001 - the orchestrator's own failure is the finding
        message, state = split_orchestrator_error(str(raised))
        if state is not None and state.get("error"):
            message = str(state["error"])
        return state, message


def replay(recorded: RecordedHistory, orchestrators: Mapping[str, Handle]) -> Verdict:
    """Replay one history through its orchestrator in ``orchestrators``."""
    name = recorded.orchestrator
    handle = orchestrators.get(name)
    if handle is None:
        return Verdict(recorded.instanceId, name, False, error=f"no orchestrator {name!r} in the app")
    state, error = _run(handle, recorded)
    groups = (state or {}).get("actions") or []
    asked = [
        a for a in flatten_actions([a for g in groups for a in g]) if a.get("actionType") not in _UNRECORDED
    ]
    history = recorded.history
    scheduling = [i for i, e in enumerate(history) if e.get("EventType") in _SCHEDULING]
    for position, index in enumerate(scheduling):
        expected = _recorded(history[index])
        if position >= len(asked):
            produced = "nothing more (it failed)" if error else "nothing more"
            return Verdict(recorded.instanceId, name, False, index, expected, produced, error)
        produced = _asked(asked[position])
        if produced != expected:
            return Verdict(recorded.instanceId, name, False, index, expected, produced, error)
    return _ending(recorded, state, error, asked[len(scheduling) :])


def _ending(
    recorded: RecordedHistory, state: dict[str, Any] | None, error: str | None, new: list[dict[str, Any]]
) -> Verdict:
    """Every recorded decision matched: an instance that ended must end again, with nothing new."""
    instance_id, name, last = recorded.instanceId, recorded.orchestrator, len(recorded.history) - 1
    ended = recorded.runtimeStatus in ("Completed", "Failed")
    if error is not None and recorded.runtimeStatus != "Failed":
        return Verdict(instance_id, name, False, error=f"the orchestrator raised: {error}")
    if ended and new:
        return Verdict(instance_id, name, False, last, "the end of the orchestration", _asked(new[0]))
    if recorded.runtimeStatus == "Completed" and not (state or {}).get("isDone"):
        return Verdict(instance_id, name, False, last, "the end of the orchestration", "a wait")
    return Verdict(instance_id, name, True)
