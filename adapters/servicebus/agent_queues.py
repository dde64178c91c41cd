"""The agent's queues: the local Service Bus (embedded profile; its client is
synchronous, so every call runs in a worker thread and the event loop never blocks), or
Service Bus itself through the aio SDK."""

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol

from azure.servicebus import ServiceBusMessage, ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusClient
from azure.servicebus.exceptions import MessageAlreadySettled, MessageLockLostError

from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import RECEIVE_WAIT_SECONDS, MessageLockLost, ReceivedMessage, from_sdk


class AgentMessaging(Protocol):
    async def receive(self, max_messages: int) -> list[ReceivedMessage]: ...
    async def complete(self, message: ReceivedMessage) -> None: ...
    async def abandon(self, message: ReceivedMessage) -> None: ...
    async def dead_letter(self, message: ReceivedMessage, reason: str, description: str) -> None: ...
    async def renew_lock(self, message: ReceivedMessage) -> datetime: ...
    async def reply(self, body: str, *, message_id: str, correlation_id: str) -> None: ...


class LocalAgentMessaging:
    def __init__(self, bus: LocalServiceBus, requests_queue: str, replies_queue: str) -> None:
        self.bus = bus
        self.requests_queue = requests_queue
        self.replies_queue = replies_queue
        # One waiting receive at a time, as for Service Bus below: idle workers queue here
        # instead of each watching the store.
        self._poll_gate = asyncio.Lock()

    async def receive(self, max_messages: int) -> list[ReceivedMessage]:
        async with self._poll_gate:
            return await asyncio.to_thread(self._receive_waiting, max_messages)

    def _receive_waiting(self, max_messages: int) -> list[ReceivedMessage]:
        # As Service Bus receives do (max_wait_time): an idle agent waits for a send instead of
        # polling the store, so it costs next to nothing; RECEIVE_WAIT_SECONDS bounds the wait for
        # what no commit announces (a scheduled message, an expired lock) and for shutdown.
        marker = self.bus.commit_marker()
        messages = self.bus.receive(self.requests_queue, max_messages)
        if not messages and self.bus.wait_for_commit(marker, RECEIVE_WAIT_SECONDS):
            messages = self.bus.receive(self.requests_queue, max_messages)
        return messages

    async def complete(self, message: ReceivedMessage) -> None:
        await asyncio.to_thread(self.bus.complete, message)

    async def abandon(self, message: ReceivedMessage) -> None:
        await asyncio.to_thread(self.bus.abandon, message)

    async def dead_letter(self, message: ReceivedMessage, reason: str, description: str) -> None:
        await asyncio.to_thread(self.bus.dead_letter, message, reason, description)

    async def renew_lock(self, message: ReceivedMessage) -> datetime:
        return await asyncio.to_thread(self.bus.renew_lock, message)

    async def close(self) -> None:
        await asyncio.to_thread(self.bus.close)

    async def reply(self, body: str, *, message_id: str, correlation_id: str) -> None:
        await asyncio.to_thread(
            self.bus.send,
            self.replies_queue,
            body,
            message_id=message_id,
            correlation_id=correlation_id,
            content_type="application/json",
        )


class ServiceBusAgentMessaging:
    """The agent's queues on Service Bus (azure-servicebus aio). One receiver, so one lock:
    the SDK's receiver is not safe for concurrent use, and settlement must use the link that
    received the message.

    While this agent holds a message, receives wait briefly (RECEIVE_WAIT_SECONDS), so its
    settlement or lock renewal never queues for long behind one. While it holds none there is
    nothing to settle or renew: a receive waits ``idle_wait`` seconds, so an idle replica makes a
    few receive calls a minute rather than five a second. ``idle_wait`` is at most the shutdown
    grace, so a stop lets the idle receive end by itself instead of cancelling it."""

    def __init__(
        self,
        client: ServiceBusClient,
        requests_queue: str,
        replies_queue: str,
        *,
        idle_wait: float = RECEIVE_WAIT_SECONDS,
    ) -> None:
        self.client = client
        self.idle_wait = idle_wait
        self.receive_calls = 0
        self.requests_queue = requests_queue
        self.receiver = client.get_queue_receiver(requests_queue, prefetch_count=0)
        self.sender = client.get_queue_sender(replies_queue)
        self._receiver_lock = asyncio.Lock()
        # Pollers queue here, not on the receiver: a settlement or a renewal then waits for at
        # most one receive (RECEIVE_WAIT_SECONDS), however many workers poll.
        self._poll_gate = asyncio.Lock()
        self._sender_lock = asyncio.Lock()
        self._held: dict[str, ServiceBusReceivedMessage] = {}
        self._opened = False

    async def receive(self, max_messages: int) -> list[ReceivedMessage]:
        async with self._poll_gate, self._receiver_lock:
            if not self._opened:
                # Open the link first: a receive's short max_wait_time would also bound its opening.
                await self.receiver.__aenter__()
                self._opened = True
            # Read under the lock: nothing is received or settled meanwhile, so "holds none" holds.
            wait = RECEIVE_WAIT_SECONDS if self._held else self.idle_wait
            self.receive_calls += 1
            batch = await self.receiver.receive_messages(max_message_count=max_messages, max_wait_time=wait)
        views = []
        for message in batch:
            view = from_sdk(self.requests_queue, message)
            self._held[view.lock_token] = message
            views.append(view)
        return views

    async def _settle(self, message: ReceivedMessage, settle: Callable[[Any], Awaitable[None]]) -> None:
        held = self._held.get(message.lock_token)
        if held is None:
            raise MessageLockLost(f"request {message.message_id} is no longer held")
        try:
            async with self._receiver_lock:
                await settle(held)
        except (MessageLockLostError, MessageAlreadySettled) as error:
            self._held.pop(message.lock_token, None)
            raise MessageLockLost(str(error)) from error
        self._held.pop(message.lock_token, None)

    async def complete(self, message: ReceivedMessage) -> None:
        await self._settle(message, self.receiver.complete_message)

    async def abandon(self, message: ReceivedMessage) -> None:
        await self._settle(message, self.receiver.abandon_message)

    async def dead_letter(self, message: ReceivedMessage, reason: str, description: str) -> None:
        await self._settle(
            message,
            lambda held: self.receiver.dead_letter_message(
                held, reason=reason, error_description=description
            ),
        )

    async def renew_lock(self, message: ReceivedMessage) -> datetime:
        held = self._held.get(message.lock_token)
        if held is None:
            raise MessageLockLost(f"request {message.message_id} is no longer held")
        try:
            async with self._receiver_lock:
                return await self.receiver.renew_message_lock(held)
        except (MessageLockLostError, MessageAlreadySettled) as error:
            raise MessageLockLost(str(error)) from error

    async def reply(self, body: str, *, message_id: str, correlation_id: str) -> None:
        message = ServiceBusMessage(
            body, message_id=message_id, correlation_id=correlation_id, content_type="application/json"
        )
        async with self._sender_lock:
            await self.sender.send_messages(message)

    async def close(self) -> None:
        await self.receiver.close()
        await self.sender.close()
        await self.client.close()
