"""A reply answers only the request that was sent (E8, E9): crafted histories of instances that
run this deployment's code, with nonces, replayed through the Durable SDK.

The orchestrator makes each request's nonce before the ``advance`` that may send it; the
activity puts it in the RequestID, and the wait is named by that RequestID. These histories are
built by asking the SDK's replay for the nonce the orchestrator makes, then writing the
``advance`` result the activity would have written with it. Replies for a step not yet begun,
with a guessed nonce, or for another attempt are raised under names nothing waits for; the
histories of ``test_agent_replies`` (requests from before nonces) still replay.
"""

import json
from datetime import timedelta
from typing import Any

import pytest

from domain.ids import reply_event, request_id, request_message_id, request_nonce
from tests.support.histories import (
    COMPLETE_BY,
    INSTANCE,
    RESERVE,
    History,
    actions,
    recorded,
    replay,
    reserve_timer,
    scheduled,
    still_waiting,
    wait,
)

# A reply nobody waits for is buffered, and the SDK warns about it: here that is the point.
pytestmark = pytest.mark.filterwarnings("ignore:Potential duplicate Task completion:UserWarning")

SALT = "5a17" * 8
STARTED = {"OrderID": "o-1", "Salt": SALT}


def started(input: dict[str, Any] = STARTED) -> History:
    history = History()
    history.episode()
    history.add(0, Name="order_attempt", Input=json.dumps(input), Version="")
    return history


def run(history: History, input: dict[str, Any] = STARTED) -> dict[str, Any]:
    return replay(history, given=input)


def advance_inputs(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(a["input"]) for a in actions(state) if a.get("functionName") == "advance"]


def nonce_of_next_advance(history: History, input: dict[str, Any] = STARTED) -> str:
    """The nonce the orchestrator gives the ``advance`` it schedules next, as replay shows it."""
    nonce: str = advance_inputs(run(history, input))[-1]["Nonce"]
    return nonce


def reply(history: History, rid: str, *, step: str, instance: str = INSTANCE, outcome: str = "ok") -> None:
    """A reply raised under the name the listener gives its RequestID."""
    body = {"RequestID": rid, "InstanceID": instance, "Step": step, "Outcome": outcome}
    body |= {"Result": {f"{step}Id": "forged"}, "Error": None if outcome == "ok" else "no", "Attempts": 1}
    history.add(15, Name=reply_event(rid), Input=json.dumps(body))


def waiting_for_reserve(input: dict[str, Any] = STARTED) -> tuple[History, str]:
    """The first ``advance`` sent ReserveInventory's request with the nonce it was given."""
    history = started(input)
    reserve = request_id("ReserveInventory", nonce_of_next_advance(history, input))
    history.activity("advance", wait(reserve, "ReserveInventory", COMPLETE_BY))
    history.timer(COMPLETE_BY)
    history.episode()
    return history, reserve


def waits(state: dict[str, Any]) -> list[str]:
    return [a["externalEventName"] for a in actions(state) if a.get("actionType") == 6]


def test_each_advance_is_given_a_nonce_that_replays_the_same_and_differs_per_request() -> None:
    history, reserve = waiting_for_reserve()
    reply(history, reserve, step="ReserveInventory")
    first, second = advance_inputs(run(history))
    again = advance_inputs(run(history))
    assert [first["Nonce"], second["Nonce"]] == [a["Nonce"] for a in again]  # replay-safe
    assert first["Nonce"] != second["Nonce"]
    assert reserve == "ReserveInventory:" + first["Nonce"]
    # Another attempt's salt makes other nonces from the same IDs and times.
    other = waiting_for_reserve({"OrderID": "o-1", "Salt": "0" * 32})[1]
    assert other != reserve


def test_the_wait_is_named_by_the_request_that_was_sent() -> None:
    history, reserve = waiting_for_reserve()
    state = run(history)
    assert still_waiting(state)
    assert waits(state) == [reply_event(reserve)] and reserve.split(":")[1] in waits(state)[0]


def test_the_real_reply_ends_the_wait_and_is_recorded() -> None:
    history, reserve = waiting_for_reserve()
    reply(history, reserve, step="ReserveInventory")
    state = run(history)
    assert recorded(state) == 1 and reserve_timer(state)["isCanceled"]
    assert advance_inputs(state)[1]["Reply"]["RequestID"] == reserve


def test_a_reply_for_a_step_not_yet_begun_cannot_answer_it_when_it_begins() -> None:
    """The live finding of issue 24: a reply for ChargePayment sent while ReserveInventory is
    awaited. Whatever its RequestID guesses, its name is not the one ChargePayment's wait gets."""
    history, reserve = waiting_for_reserve()
    reply(history, request_message_id(INSTANCE, "ChargePayment"), step="ChargePayment", outcome="permanent")
    reply(history, request_id("ChargePayment", "0" * 32), step="ChargePayment", outcome="permanent")
    reply(history, request_id("ChargePayment", request_nonce("guess", SALT)), step="ChargePayment")
    assert still_waiting(run(history))
    reply(history, reserve, step="ReserveInventory")
    charge = request_id("ChargePayment", nonce_of_next_advance(history))
    history.activity("advance", wait(charge, "ChargePayment", COMPLETE_BY + timedelta(minutes=1)))
    history.timer(COMPLETE_BY + timedelta(minutes=1))
    history.episode()
    state = run(history)
    assert not state["isDone"]
    assert recorded(state) == 1  # ReserveInventory only: ChargePayment still waits for its reply
    assert waits(state)[-1] == reply_event(charge)
    history.episode()
    reply(history, charge, step="ChargePayment")
    state = run(history)
    assert recorded(state) == 2
    assert advance_inputs(state)[-1]["Reply"]["Result"] == {"ChargePaymentId": "forged"}  # from charge


@pytest.mark.parametrize(
    "guess",
    [
        request_message_id(INSTANCE, "ReserveInventory"),  # the ID before nonces
        request_id("ReserveInventory", "f" * 32),
        request_id("ReserveInventory", request_nonce("guess", SALT)),
        request_id("ReserveInventory", request_nonce("guess", None)),
    ],
)
def test_a_guessed_request_id_leaves_the_wait_open(guess: str) -> None:
    history, reserve = waiting_for_reserve()
    reply(history, guess, step="ReserveInventory")
    state = run(history)
    assert still_waiting(state) and not reserve_timer(state).get("isCanceled")
    reply(history, reserve, step="ReserveInventory")
    assert recorded(run(history)) == 1


def test_a_reply_for_a_previous_attempt_is_inert() -> None:
    """Attempt 1's request, answered at attempt 2 (same step, same order): attempt 2's nonce is
    made from its own instance ID and salt, so the names differ."""
    previous = waiting_for_reserve({"OrderID": "o-1", "Salt": "1" * 32})[1]
    history, reserve = waiting_for_reserve()
    assert previous != reserve
    reply(history, previous, step="ReserveInventory", instance="o-1-0")
    reply(history, previous, step="ReserveInventory")  # re-addressed to this attempt
    assert still_waiting(run(history))


def test_a_reply_raised_under_the_right_name_for_another_request_does_not_end_the_step() -> None:
    """Belt and braces: were a name ever raised with another RequestID inside, the orchestrator
    compares the RequestID too and stops, leaving the record to the Supervisor."""
    history, reserve = waiting_for_reserve()
    body = {"RequestID": request_id("ReserveInventory", "e" * 32), "InstanceID": INSTANCE}
    body |= {"Step": "ReserveInventory", "Outcome": "ok", "Result": {}, "Error": None, "Attempts": 1}
    history.add(15, Name=reply_event(reserve), Input=json.dumps(body))
    state = run(history)
    assert state["isDone"] and state["output"] == "timed-out" and recorded(state) == 0


def test_an_instance_started_before_salts_still_gets_a_nonce() -> None:
    unsalted = {"OrderID": "o-1"}
    history, reserve = waiting_for_reserve(unsalted)
    assert reserve != waiting_for_reserve()[1]
    reply(history, reserve, step="ReserveInventory")
    assert recorded(run(history, unsalted)) == 1


def test_an_instance_waiting_on_a_request_from_before_nonces_gets_its_reply_then_uses_nonces() -> None:
    """In flight at the deployment: its history holds a legacy RequestID, and the wait keeps the
    name it had; the next request it sends carries a nonce."""
    history = started({"OrderID": "o-1"})
    history.activity("advance", wait(RESERVE, "ReserveInventory", COMPLETE_BY))
    history.timer(COMPLETE_BY)
    history.episode()
    state = run(history, {"OrderID": "o-1"})
    assert waits(state) == ["AgentReply.o-1-1.ReserveInventory"]  # exactly as before nonces
    body = {"RequestID": RESERVE, "InstanceID": INSTANCE, "Step": "ReserveInventory", "Outcome": "ok"}
    history.add(15, Name=reply_event(RESERVE), Input=json.dumps(body | {"Result": {}, "Attempts": 1}))
    state = run(history, {"OrderID": "o-1"})
    assert scheduled(state) == ["advance", "advance"] and recorded(state) == 1
    assert len(advance_inputs(state)[1]["Nonce"]) == 32
