"""Replies cannot block a step (E8, E10): crafted histories replayed through the Durable SDK.

Each case builds the history an attempt would have up to its wait for the ReserveInventory
reply, adds replies in some order, and asks the SDK's own replay what the orchestrator does
next. Only the reply to this attempt's request may end the wait; stray, duplicate and late
replies stay inert whatever order they arrive in, and every path out of a wait cancels its timer.

These requests carry the RequestID from before nonces (``<instance>:<action>``), as an instance
in flight at the deployment holds them: such a wait keeps its name and its rules.
``test_reply_nonces`` has the histories of this deployment's requests.
"""

import json
from datetime import timedelta

from domain.ids import request_message_id
from orchestrators.order_attempt import agent_event
from tests.support.histories import (
    COMPLETE_BY,
    INSTANCE,
    RESERVE,
    History,
    actions,
    recorded,
    replay,
    reserve_timer,
    still_waiting,
    wait,
)

CHARGE = request_message_id(INSTANCE, "ChargePayment")


def waiting_for_reserve() -> History:
    """The first ``advance`` (ValidateOrder done, ReserveInventory begun, its request sent); the
    timer is set."""
    history = History()
    history.episode()
    history.add(0, Name="order_attempt", Input=json.dumps({"OrderID": "o-1"}), Version="")
    history.activity("advance", wait(RESERVE, "ReserveInventory", COMPLETE_BY))
    history.timer(COMPLETE_BY)
    history.episode()
    return history


def test_a_stray_reply_before_the_wait_is_inert() -> None:
    history = waiting_for_reserve()
    history.reply(request_message_id("o-1-0", "ReserveInventory"))  # an earlier attempt's reply
    state = replay(history)
    assert still_waiting(state)
    assert not reserve_timer(state).get("isCanceled")


def test_two_strays_leave_the_wait_open_and_the_real_reply_still_ends_it() -> None:
    history = waiting_for_reserve()
    history.reply(request_message_id("o-1-0", "ReserveInventory"))
    history.reply(CHARGE, step="ChargePayment")  # this attempt, the next step: not asked yet
    assert still_waiting(replay(history))
    history.episode()
    history.reply(RESERVE)
    state = replay(history)
    assert recorded(state) == 1 and reserve_timer(state)["isCanceled"]


def test_the_real_reply_then_a_stray_records_the_step_once() -> None:
    history = waiting_for_reserve()
    history.reply(RESERVE)
    history.reply(request_message_id("o-1-0", "ReserveInventory"))
    state = replay(history)
    assert recorded(state) == 1 and reserve_timer(state)["isCanceled"]


def test_a_duplicate_real_reply_cannot_answer_the_next_step() -> None:
    """The duplicate stays buffered under its own name; the next step's wait has another."""
    history = waiting_for_reserve()
    history.reply(RESERVE)
    history.reply(RESERVE)
    history.activity("advance", wait(CHARGE, "ChargePayment", COMPLETE_BY + timedelta(minutes=1)))
    state = replay(history)
    assert not state["isDone"]
    assert recorded(state) == 1  # ChargePayment still waits for its reply
    waits = [a for a in actions(state) if a.get("actionType") == 6]
    assert [w["externalEventName"] for w in waits][-1] == agent_event(CHARGE)


def test_the_timer_ends_the_wait_when_no_reply_comes() -> None:
    history = waiting_for_reserve()
    history.reply(request_message_id("o-1-0", "ReserveInventory"))
    history.add(11, TimerId=history.next_id - 1, FireAt=COMPLETE_BY.isoformat().replace("+00:00", "Z"))
    state = replay(history)
    assert state["isDone"] and state["output"] == "timed-out"
    assert recorded(state) == 0


def test_event_names_are_unique_per_request_and_url_safe() -> None:
    names = {
        agent_event(request_message_id(f"o-{n}-{a}", s)) for n in range(3) for a in (1, 2) for s in ("A", "B")
    }
    assert len(names) == 12
    assert all(ch.isalnum() or ch in "._-" for name in names for ch in name)


def test_a_reply_raised_through_the_sdk_arrives_as_json_text_and_still_ends_the_wait() -> None:
    """What Azure delivers: the SDK's ``raise_event`` encodes the body twice and the extension
    stores it as parsed, so the event's input is JSON text holding the reply's JSON."""
    history = waiting_for_reserve()
    body = {"RequestID": RESERVE, "InstanceID": INSTANCE, "Step": "ReserveInventory", "Outcome": "ok"}
    body |= {"Result": {"ReservationId": "r-1"}, "Error": None, "Attempts": 1}
    history.add(15, Name=agent_event(RESERVE), Input=json.dumps(json.dumps(body)))
    state = replay(history)
    assert recorded(state) == 1 and reserve_timer(state)["isCanceled"]
