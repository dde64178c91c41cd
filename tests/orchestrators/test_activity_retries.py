"""A failed activity is called again after durable timers (a store down for a whole retry
budget), and only after the last wait does the failure end the attempt."""

import json
from datetime import timedelta

import pytest

from orchestrators.order_attempt import ACTIVITY_RETRY_DELAYS
from tests.support.histories import History, actions, replay, scheduled


def started() -> History:
    history = History()
    history.episode()
    history.add(0, Name="order_attempt", Input=json.dumps({"OrderID": "o-1"}), Version="")
    return history


def fail_advance(history: History) -> None:
    task_id = history.next_id
    history.next_id += 1
    history.add(4, EventId=task_id, Name="advance")
    history.add(6, TaskScheduledId=task_id, Reason="the state store is unavailable", Details="")


def wait_out(history: History, delay: timedelta) -> None:
    fire_at = history.now + delay
    history.timer(fire_at)
    history.add(11, TimerId=history.next_id - 1, FireAt=fire_at.isoformat().replace("+00:00", "Z"))
    history.episode()


def test_a_failed_activity_waits_then_is_called_again() -> None:
    history = started()
    fail_advance(history)
    history.episode()
    state = replay(history)
    [timer] = [a for a in actions(state) if a.get("fireAt")]
    assert not state["isDone"] and scheduled(state) == ["advance"]  # waiting, not called again yet
    assert timer["fireAt"].startswith((history.now + ACTIVITY_RETRY_DELAYS[0]).strftime("%Y-%m-%dT%H:%M:%S"))
    wait_out(history, ACTIVITY_RETRY_DELAYS[0])
    assert scheduled(replay(history)) == ["advance", "advance"]


def test_the_failure_ends_the_attempt_only_after_every_wait() -> None:
    history = started()
    for delay in ACTIVITY_RETRY_DELAYS:
        fail_advance(history)
        history.episode()
        wait_out(history, delay)
    assert not replay(history)["isDone"]  # the last call is out
    fail_advance(history)
    history.episode()
    # The SDK reports an orchestrator that raised by raising, with its state in the message.
    with pytest.raises(Exception, match="the state store is unavailable") as failed:
        replay(history)
    state = json.loads(str(failed.value).split("$OutOfProcData$:", 1)[1])
    assert state["error"].startswith("the state store is unavailable")
    assert scheduled(state).count("advance") == len(ACTIVITY_RETRY_DELAYS) + 1
