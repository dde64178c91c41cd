"""Messaging on Azure Service Bus (azure-servicebus): the emulators and azure profiles.

Sends go through one sender per queue, kept open for the process (a link per send would cost
an AMQP attach and a CBS token each time). In Azure the client authenticates with the
Function App's managed identity (``ServiceBusConnection__fullyQualifiedNamespace``); a
connection string is for local brokers only.

Dead-lettering the message a trigger is processing (``MessageSettlement``) must happen on the
link that received it, which the Functions host owns, not the app. A host in the same process
(devhost on a broker) registers what it holds in ``HELD``, and the app settles through it. In
Azure, settling from Python needs the SDK-type Service Bus binding, still in beta; until it is
adopted ``dead_letter`` raises ``SettlementUnavailable``: the function fails, the broker redelivers, and after
``MaxDeliveryCount`` moves the message to the dead-letter queue itself — the operator alert
raised before the attempt carries the reason (docs/operating.md, "Known limitations").
"""

import contextlib
import threading
from collections.abc import Iterator
from datetime import datetime

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusReceiver,
    ServiceBusSender,
    ServiceBusSubQueue,
)
from azure.servicebus.exceptions import ServiceBusError

from adapters.servicebus.messages import ReceivedMessage, dead_letter_queue, from_sdk, split_entity


class SettlementUnavailable(RuntimeError):
    pass


class _Held:
    def __init__(
        self, lock: threading.Lock, receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage
    ):
        self.lock = lock
        self.receiver = receiver
        self.message = message


class HeldMessages:
    """Messages a trigger in this process holds, by lock token, with the receiver that holds them.

    Service Bus settles a message only on the link that received it. In Azure the Functions host
    owns that link; an in-process host (devhost on a broker) registers what it holds here, so
    ``ServiceBusMessaging.dead_letter`` can settle on the app's behalf, as the SDK-type binding's
    ``ServiceBusMessageActions`` does.
    """

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}
        self._guard = threading.Lock()

    def hold(
        self,
        lock_token: str,
        lock: threading.Lock,
        receiver: ServiceBusReceiver,
        message: ServiceBusReceivedMessage,
    ) -> None:
        with self._guard:
            self._held[lock_token] = _Held(lock, receiver, message)

    def get(self, lock_token: str) -> _Held | None:
        with self._guard:
            return self._held.get(lock_token)

    def release(self, lock_token: str) -> None:
        with self._guard:
            self._held.pop(lock_token, None)

    def dead_letter(self, lock_token: str, reason: str, description: str) -> bool:
        """Dead-letter a held message; False if no trigger in this process holds it."""
        held = self.get(lock_token)
        if held is None:
            return False
        with held.lock:
            held.receiver.dead_letter_message(held.message, reason=reason, error_description=description)
        self.release(lock_token)
        return True


# One per process, like the host that fills it.
HELD = HeldMessages()


class ServiceBusMessaging:
    """MessageSender and MessageSettlement over a Service Bus namespace (or a local broker)."""

    def __init__(self, client: ServiceBusClient) -> None:
        self.client = client
        self._senders: dict[str, tuple[threading.Lock, ServiceBusSender]] = {}
        self._guard = threading.Lock()

    def _sender(self, queue: str) -> tuple[threading.Lock, ServiceBusSender]:
        # The SDK's sync sender is not thread-safe, and activities send from a thread pool.
        with self._guard:
            if queue not in self._senders:
                self._senders[queue] = (threading.Lock(), self.client.get_queue_sender(queue))
            return self._senders[queue]

    def send(
        self,
        queue: str,
        body: str | bytes,  # bytes: a dead letter resubmitted as it was, UTF-8 or not
        *,
        message_id: str,
        correlation_id: str | None = None,
        properties: dict[str, str] | None = None,
        scheduled_at: datetime | None = None,
    ) -> None:
        lock, sender = self._sender(queue)
        message = ServiceBusMessage(
            body,
            message_id=message_id,
            correlation_id=correlation_id,
            content_type="application/json",
            application_properties=dict(properties or {}),  # type: ignore[arg-type]
            scheduled_enqueue_time_utc=scheduled_at,
        )
        with lock:
            sender.send_messages(message)

    def dead_letter(self, queue: str, lock_token: str, reason: str, description: str) -> None:
        if HELD.dead_letter(lock_token, reason, description):
            return
        raise SettlementUnavailable(
            f"cannot dead-letter message {lock_token} of {queue} from the app ({reason}): the host "
            "owns its receiver; it is redelivered and the broker dead-letters it at MaxDeliveryCount"
        )

    def close(self) -> None:
        with self._guard:
            for _, sender in self._senders.values():
                sender.close()
            self._senders.clear()
        self.client.close()

    # --- operator tools: browse queues and dead letters -----------------------------------------

    def peek(self, queue: str, limit: int) -> list[ReceivedMessage]:
        name, dead_letters = split_entity(queue)
        sub_queue = ServiceBusSubQueue.DEAD_LETTER if dead_letters else None
        with self.client.get_queue_receiver(name, sub_queue=sub_queue) as receiver:
            peeked: list[ReceivedMessage] = []
            while len(peeked) < limit:
                batch = receiver.peek_messages(
                    max_message_count=min(limit - len(peeked), 100),
                    sequence_number=peeked[-1].sequence_number + 1 if peeked else 0,
                )
                if not batch:
                    break
                peeked += [from_sdk(queue, m) for m in batch]
            return peeked

    def resubmit_dead_letter(self, queue: str, message_id: str) -> bool:
        """Move one dead-lettered message back to its queue under a new MessageId (the old one
        may still be in the duplicate-detection window). False if it is not there.

        Found by a peek first, so an absent one touches nothing. Service Bus locks a dead-letter
        queue's messages in sequence order only (no receive by sequence number unless deferred),
        so the dead letters ahead of it are locked and released on the way (their delivery
        counts rise by one); none behind it is received."""
        target = next(
            (m for m in self.peek(dead_letter_queue(queue), 10_000) if m.message_id == message_id), None
        )
        if target is None:
            return False
        with self.client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
        ) as receiver:
            held: list[ServiceBusReceivedMessage] = []
            try:
                for message in _one_at_a_time(receiver):
                    if message.sequence_number != target.sequence_number:
                        held.append(message)
                        if (message.sequence_number or 0) > target.sequence_number:
                            return False  # moved by someone else since the peek
                        continue
                    copy = from_sdk(queue, message)
                    self.send(
                        queue,
                        copy.body,
                        message_id=f"{message_id}:resubmitted:{copy.sequence_number}",
                        correlation_id=copy.correlation_id,
                        properties={k: str(v) for k, v in copy.application_properties.items()},
                    )
                    receiver.complete_message(message)
                    return True
                return False
            finally:
                for other in held:
                    # Its lock may have run out during a long scan: it is back on the DLQ anyway.
                    with contextlib.suppress(ServiceBusError):
                        receiver.abandon_message(other)

    def remove(self, queue: str, message_ids: set[str] | None) -> list[str]:
        """Complete the messages of ``queue`` with these IDs (all of them for None): an operator
        acknowledging alerts. Service Bus locks in sequence order only, so a message ahead of
        one removed is locked and released on the way (its delivery count rises by one); the
        scan stops after the last one wanted. The IDs removed, in queue order."""
        wanted = [m for m in self.peek(queue, 10_000) if message_ids is None or m.message_id in message_ids]
        if not wanted:
            return []
        last = wanted[-1].sequence_number
        numbers = {m.sequence_number for m in wanted}
        removed: list[str] = []
        with self.client.get_queue_receiver(queue, max_wait_time=1) as receiver:
            held: list[ServiceBusReceivedMessage] = []
            try:
                for message in _one_at_a_time(receiver):
                    number = message.sequence_number or 0
                    if number in numbers:
                        receiver.complete_message(message)
                        removed.append(message.message_id or "")
                    else:
                        held.append(message)
                    if number >= last:
                        break
            finally:
                for other in held:
                    with contextlib.suppress(ServiceBusError):
                        receiver.abandon_message(other)
        return removed


def _one_at_a_time(receiver: ServiceBusReceiver) -> Iterator[ServiceBusReceivedMessage]:
    """Messages received singly, in order, until none is left: with no prefetch, each
    ``receive_messages(1)`` issues link credit for one message only. The receiver's own iterator
    keeps a continuous receive open instead, which may lock (and so count a delivery of) messages
    past the one an operator asked for."""
    while batch := receiver.receive_messages(max_message_count=1, max_wait_time=1):
        yield from batch
