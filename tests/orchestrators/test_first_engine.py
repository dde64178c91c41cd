"""The first engine still replays the histories its instances hold (C7): a crafted v1 history,
with results as its activities wrote them, replayed through the Durable SDK, calls the same
activities with the same JSON inputs."""

import json
from typing import Any

import azure.durable_functions as df

from domain.ids import request_message_id
from domain.sample_workflow import ORDER_WORKFLOW_V1
from orchestrators.first_engine import run_workflow
from orchestrators.order_attempt import agent_event
from tests.support.histories import COMPLETE_BY, INSTANCE, History, actions
from tests.support.histories import replay as replay_through

ORDER = {
    "OrderID": "o-1",
    "Customer": "Contoso",
    "Total": "20.00",
    "Lines": [{"Sku": "SKU-1", "Quantity": 2, "UnitPrice": "10.00"}],
}
IDS = {"OrderID": "o-1", "InstanceID": INSTANCE}
RESERVE = request_message_id(INSTANCE, "ReserveInventory")


def orchestrator(context: df.DurableOrchestrationContext):  # type: ignore[no-untyped-def]
    return (yield from run_workflow(context, ORDER_WORKFLOW_V1))


def replay(history: History) -> dict[str, Any]:
    return replay_through(history, orchestrator)


def calls(state: dict[str, Any]) -> list[tuple[str, str]]:
    return [(a["functionName"], a["input"]) for a in actions(state) if a.get("functionName")]


def waiting_for_reserve() -> History:
    history = History()
    history.episode()
    history.add(0, Name="order_workflow_v1", Input=json.dumps({"OrderID": "o-1"}), Version="")
    start = {"Fenced": False, "Missing": False, "Compensating": False, "CompletedSteps": []}
    history.activity("read_order", {**start, "ToCompensate": [], "Order": ORDER})
    history.activity("run_local_step", {"Fenced": False})
    begun = {"Fenced": False, "Exhausted": False, "CompleteBy": COMPLETE_BY.isoformat(), "CallsGranted": 3}
    history.activity("begin_step", begun)
    history.activity("send_agent_request", RESERVE)
    history.timer(COMPLETE_BY)
    history.episode()
    return history


def test_a_v1_attempt_replays_to_the_same_calls_with_the_same_inputs() -> None:
    history = waiting_for_reserve()
    history.reply(RESERVE)
    state = replay(history)
    reserve = {**IDS, "Step": "ReserveInventory", "Action": "ReserveInventory"}
    assert calls(state) == [
        ("read_order", json.dumps(IDS)),
        (
            "run_local_step",
            json.dumps({**IDS, "Step": "ValidateOrder", "Action": "ValidateOrder", "Order": ORDER}),
        ),
        ("begin_step", json.dumps(reserve)),
        (
            "send_agent_request",
            json.dumps(
                {**reserve, "CompleteBy": COMPLETE_BY.isoformat(), "MaxAttempts": 3, "Payload": ORDER}
            ),
        ),
        ("record_step", json.dumps({**reserve, "Result": {"ReservationId": "r-1"}})),
    ]
    waits = [a["externalEventName"] for a in actions(state) if a.get("actionType") == 6]
    assert waits == [agent_event(RESERVE)]


def test_a_permanent_failure_finishes_with_the_error_and_compensates_what_finish_lists() -> None:
    history = waiting_for_reserve()
    history.reply(RESERVE, outcome="permanent")
    history.events[-1]["Input"] = history.events[-1]["Input"].replace(
        '"Error": null', '"Error": "out of stock"'
    )
    history.episode()
    to_undo = [
        {"Step": "ReserveInventory", "Action": "ReleaseInventory", "Data": {"ReserveInventoryId": "r-1"}}
    ]
    history.activity("finish", {"Fenced": False, "State": "Compensating", "ToCompensate": to_undo})
    state = replay(history)
    failed = {**IDS, "Outcome": "fail", "Error": "ReserveInventory: out of stock"}
    release = {**IDS, "Step": "ReserveInventory", "Action": "ReleaseInventory"}
    assert calls(state)[-2:] == [("finish", json.dumps(failed)), ("begin_step", json.dumps(release))]


def test_a_fenced_step_ends_the_attempt() -> None:
    history = waiting_for_reserve()
    history.reply(RESERVE)
    history.episode()
    history.activity("record_step", {"Fenced": False})
    history.activity("begin_step", {"Fenced": True})
    state = replay(history)
    assert state["isDone"] and state["output"] == "fenced"


def test_the_timer_ends_the_wait_when_no_reply_comes() -> None:
    history = waiting_for_reserve()
    history.add(11, TimerId=history.next_id - 1, FireAt=COMPLETE_BY.isoformat().replace("+00:00", "Z"))
    state = replay(history)
    assert state["isDone"] and state["output"] == "timed-out"
    assert [name for name, _ in calls(state)][-1] == "send_agent_request"
