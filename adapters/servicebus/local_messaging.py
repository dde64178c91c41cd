"""Messaging for the embedded profile: the local Service Bus (``local_bus``, one SQLite file),
shared by the Function App, devhost, the agent worker processes and the tests."""

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import ReceivedMessage, dead_letter_queue


class LocalMessaging:
    """MessageSender and MessageSettlement over one local Service Bus file."""

    def __init__(self, path: str | Path, clock: Callable[[], datetime]) -> None:
        # The app's clock: under devhost's virtual clock, message times must be virtual too.
        self.bus = LocalServiceBus(path, clock=clock)

    def send(
        self,
        queue: str,
        body: str | bytes,  # bytes: as ServiceBusMessaging.send
        *,
        message_id: str,
        correlation_id: str | None = None,
        properties: dict[str, str] | None = None,
        scheduled_at: datetime | None = None,
    ) -> None:
        self.bus.send(
            queue,
            body,
            message_id=message_id,
            correlation_id=correlation_id,
            content_type="application/json",
            application_properties=properties or {},
            scheduled_enqueue_time=scheduled_at,
        )

    def active_messages(self, queue: str) -> int:
        return self.bus.active_count(queue)

    def dead_letter(self, queue: str, lock_token: str, reason: str, description: str) -> None:
        self.bus.dead_letter_by_lock_token(queue, lock_token, reason, description)

    def close(self) -> None:
        self.bus.close()

    # --- operator tools: browse queues and dead letters -----------------------------------------

    def peek(self, queue: str, limit: int) -> list[ReceivedMessage]:
        return self.bus.peek(queue, limit)

    def resubmit_dead_letter(self, queue: str, message_id: str) -> bool:
        """Move one dead-lettered message back to its queue under a new MessageId (the old one
        may still be in the duplicate-detection window). False if it is not there. Found by a
        peek and locked by its sequence number: no other dead letter is received or counted."""
        dead_letters = dead_letter_queue(queue)
        found = next((m for m in self.bus.peek(dead_letters, 10_000) if m.message_id == message_id), None)
        if found is None:
            return False
        message = self.bus.receive_sequence_number(dead_letters, found.sequence_number)
        if message is None:  # another operator moved it (or holds it) since the peek
            return False
        self.bus.send(
            queue,
            message.body,
            message_id=f"{message_id}:resubmitted:{message.sequence_number}",
            correlation_id=message.correlation_id,
            content_type=message.content_type,
            application_properties=message.application_properties,
        )
        self.bus.complete(message)
        return True

    def remove(self, queue: str, message_ids: set[str] | None) -> list[str]:
        """Complete the messages of ``queue`` with these IDs (all of them for None): an operator
        acknowledging alerts. Each is locked by its sequence number: nothing else is touched.
        The IDs removed, in queue order."""
        removed = []
        for peeked in self.bus.peek(queue, 10_000):
            if message_ids is not None and peeked.message_id not in message_ids:
                continue
            message = self.bus.receive_sequence_number(queue, peeked.sequence_number)
            if message is not None:  # else another operator took it since the peek
                self.bus.complete(message)
                removed.append(message.message_id)
        return removed
