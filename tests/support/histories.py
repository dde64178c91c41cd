"""Durable histories built event by event, as the extension sends them, and replayed through the
Durable SDK to see what an orchestrator does next (tests/orchestrators/)."""

import json
from datetime import datetime, timedelta
from typing import Any

import azure.durable_functions as df
from azure.durable_functions.models import DurableOrchestrationContext

from domain.ids import request_message_id
from orchestrators.order_attempt import agent_event, run_attempt

STARTS_AT = datetime.fromisoformat("2026-03-01T09:00:00+00:00")
INSTANCE = "o-1-1"
COMPLETE_BY = STARTS_AT + timedelta(seconds=30)
# ReserveInventory's RequestID from before nonces (``<instance>:<action>``).
RESERVE = request_message_id(INSTANCE, "ReserveInventory")


def orchestrator(context: df.DurableOrchestrationContext):  # type: ignore[no-untyped-def]
    return (yield from run_attempt(context))


class History:
    """Events as the Durable extension sends them (PascalCase, JSON-text inputs and results)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.now = STARTS_AT
        self.next_id = 0

    def add(self, kind: int, **fields: Any) -> None:
        self.now += timedelta(milliseconds=10)
        stamp = self.now.isoformat().replace("+00:00", "Z")
        self.events.append(
            {"EventType": kind, "EventId": -1, "IsPlayed": False, "Timestamp": stamp, **fields}
        )

    def episode(self) -> None:
        self.add(12)  # OrchestratorStarted

    def activity(self, name: str, result: Any) -> None:
        task_id = self.next_id
        self.next_id += 1
        self.add(4, EventId=task_id, Name=name)
        self.add(5, TaskScheduledId=task_id, Result=json.dumps(result))

    def timer(self, fire_at: datetime) -> None:
        self.add(10, EventId=self.next_id, FireAt=fire_at.isoformat().replace("+00:00", "Z"))
        self.next_id += 1

    def reply(self, request_id: str, *, outcome: str = "ok", step: str = "ReserveInventory") -> None:
        body = {"RequestID": request_id, "InstanceID": request_id.split(":", maxsplit=1)[0], "Step": step}
        body |= {"Outcome": outcome, "Result": {"ReservationId": "r-1"}, "Error": None, "Attempts": 1}
        self.add(15, Name=agent_event(request_id), Input=json.dumps(body))


def wait(request_id: str, step: str, complete_by: datetime) -> dict[str, Any]:
    """``advance``'s answer when it has sent a request."""
    sent = {"RequestID": request_id, "CompleteBy": complete_by.isoformat(), "Step": step, "Action": step}
    return {"Wait": sent}


def replay(history: History, run: Any = None, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """Replay ``history`` through ``run`` (by default the attempt's orchestrator), started with
    ``given`` (by default an input from before salts)."""
    context = {
        "history": history.events,
        "instanceId": INSTANCE,
        "isReplaying": False,
        "parentInstanceId": None,
        "input": json.dumps(given or {"OrderID": "o-1"}),
        "upperSchemaVersion": 2,
        "upperSchemaVersionNew": 3,
    }
    handle = df.Orchestrator(run or orchestrator).handle
    state: dict[str, Any] = json.loads(handle(DurableOrchestrationContext.from_json(json.dumps(context))))
    return state


def actions(state: dict[str, Any]) -> list[dict[str, Any]]:
    flat: list[dict[str, Any]] = []
    for group in state["actions"]:
        for action in group:
            flat.extend(action.get("compoundActions") or [action])
    return flat


def scheduled(state: dict[str, Any]) -> list[str]:
    return [a["functionName"] for a in actions(state) if a.get("functionName")]


def reserve_timer(state: dict[str, Any]) -> dict[str, Any]:
    [timer] = [
        a
        for a in actions(state)
        if a.get("fireAt") and a["fireAt"].startswith(COMPLETE_BY.strftime("%Y-%m-%dT%H:%M:%S"))
    ]
    return timer


def recorded(state: dict[str, Any]) -> int:
    """How often the orchestrator asked ``advance`` to record a reply (the first call records none)."""
    return scheduled(state).count("advance") - 1


def still_waiting(state: dict[str, Any]) -> bool:
    return not state["isDone"] and recorded(state) == 0
