"""The agent's receive on Service Bus waits long while it holds nothing (few billed receive calls
when idle) and briefly while it holds a message (its settlement must not queue behind a wait)."""

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from adapters.servicebus.agent_queues import ServiceBusAgentMessaging
from adapters.servicebus.messages import RECEIVE_WAIT_SECONDS
from agent_worker.settings import AgentSettings


class _Message:
    def __init__(self, n: int) -> None:
        self.message_id = f"m-{n}"
        self.lock_token = f"t-{n}"
        self.locked_until_utc = datetime.now(UTC) + timedelta(minutes=1)


class _Receiver:
    def __init__(self, batches: list[list[Any]]) -> None:
        self.batches = batches
        self.waits: list[float] = []

    async def __aenter__(self) -> "_Receiver":
        return self

    async def receive_messages(self, max_message_count: int, max_wait_time: float) -> list[Any]:
        self.waits.append(max_wait_time)
        return self.batches.pop(0) if self.batches else []

    async def complete_message(self, message: Any) -> None:
        pass


class _Client:
    def __init__(self, receiver: _Receiver) -> None:
        self.receiver = receiver

    def get_queue_receiver(self, queue: str, prefetch_count: int) -> _Receiver:
        return self.receiver

    def get_queue_sender(self, queue: str) -> object:
        return object()


def test_idle_receives_wait_long_and_busy_ones_briefly(monkeypatch) -> None:
    monkeypatch.setattr(
        "adapters.servicebus.agent_queues.from_sdk",
        lambda queue, m: type("View", (), {"lock_token": m.lock_token, "message_id": m.message_id})(),
    )
    receiver = _Receiver([[], [_Message(1)], []])
    messaging = ServiceBusAgentMessaging(_Client(receiver), "requests", "replies", idle_wait=15.0)  # type: ignore[arg-type]

    async def go() -> None:
        assert await messaging.receive(1) == []  # idle: holds nothing
        [held] = await messaging.receive(1)  # idle wait, and a message arrives
        await messaging.receive(1)  # holding m-1: a brief wait, so its completion is not held up
        await messaging.complete(held)
        await messaging.receive(1)  # idle again

    asyncio.run(go())
    assert receiver.waits == [15.0, 15.0, RECEIVE_WAIT_SECONDS, 15.0]
    assert messaging.receive_calls == 4


def test_the_idle_wait_stays_within_the_shutdown_grace() -> None:
    assert AgentSettings.model_validate({}).idle_wait == 15.0
    short = AgentSettings.model_validate({"AGENT_SHUTDOWN_GRACE_SECONDS": 5})
    assert short.idle_wait == 5.0  # a stop never has to cancel the waiting receive
    assert AgentSettings.model_validate({"AGENT_SHUTDOWN_GRACE_SECONDS": 0}).idle_wait == RECEIVE_WAIT_SECONDS
