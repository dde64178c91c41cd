"""The agent's queues. Embedded profile: devhost's local Service Bus, whose client is
synchronous, so every call runs in a worker thread and the event loop never blocks."""

import asyncio
from datetime import datetime
from typing import Protocol

from devhost.servicebus import LocalServiceBus, ReceivedMessage


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

    async def receive(self, max_messages: int) -> list[ReceivedMessage]:
        return await asyncio.to_thread(self.bus.receive, self.requests_queue, max_messages)

    async def complete(self, message: ReceivedMessage) -> None:
        await asyncio.to_thread(self.bus.complete, message)

    async def abandon(self, message: ReceivedMessage) -> None:
        await asyncio.to_thread(self.bus.abandon, message)

    async def dead_letter(self, message: ReceivedMessage, reason: str, description: str) -> None:
        await asyncio.to_thread(self.bus.dead_letter, message, reason, description)

    async def renew_lock(self, message: ReceivedMessage) -> datetime:
        return await asyncio.to_thread(self.bus.renew_lock, message)

    async def reply(self, body: str, *, message_id: str, correlation_id: str) -> None:
        await asyncio.to_thread(
            self.bus.send,
            self.replies_queue,
            body,
            message_id=message_id,
            correlation_id=correlation_id,
            content_type="application/json",
        )
