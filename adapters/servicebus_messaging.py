"""Messaging on Azure Service Bus (azure-servicebus): the emulators and azure profiles.

Sends go through one sender per queue, kept open for the process (a link per send would cost
an AMQP attach and a CBS token each time). In Azure the client authenticates with the
Function App's managed identity (``ServiceBusConnection__fullyQualifiedNamespace``); a
connection string is for local brokers only.

Dead-lettering the message a trigger is processing (``MessageSettlement``) must happen on the
link that received it, which the Functions host owns, not the app. Under devhost the host is
in-process and settles it by lock token. In Azure, settling from Python needs the SDK-type
Service Bus binding, still in beta; until it is adopted ``dead_letter`` raises
``SettlementUnavailable``: the function fails, the broker redelivers, and after
``MaxDeliveryCount`` moves the message to the dead-letter queue itself — the operator alert
raised before the attempt carries the reason (README "Known limitations").
"""

import contextlib
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from azure.servicebus import (
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusReceivedMessage,
    ServiceBusSender,
    ServiceBusSubQueue,
)
from azure.servicebus.amqp import AmqpMessageBodyType
from azure.servicebus.exceptions import ServiceBusError

DEAD_LETTER_SUFFIX = "/$deadletterqueue"


class SettlementUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class BrokerMessage:
    """What the operator tools read of a message (the fields devhost's local bus also has)."""

    message_id: str
    body: bytes
    correlation_id: str | None
    content_type: str | None
    application_properties: dict[str, Any]
    delivery_count: int
    enqueued_time: datetime
    sequence_number: int
    dead_letter_reason: str | None
    dead_letter_error_description: str | None


def broker_message(message: ServiceBusReceivedMessage) -> BrokerMessage:
    return BrokerMessage(
        message_id=str(message.message_id),
        body=_message_bytes(message),
        correlation_id=message.correlation_id,
        content_type=message.content_type,
        application_properties=text_properties(message.application_properties),
        delivery_count=(message.delivery_count or 0) + 1,  # 1 first, as Functions and devhost count
        enqueued_time=message.enqueued_time_utc or datetime.min,
        sequence_number=message.sequence_number or 0,
        dead_letter_reason=message.dead_letter_reason,
        dead_letter_error_description=message.dead_letter_error_description,
    )


def text_properties(properties: dict[Any, Any] | None) -> dict[str, Any]:
    """AMQP keys and string values arrive as bytes; the app only ever sets strings."""

    def text(value: Any) -> Any:
        return value.decode() if isinstance(value, bytes) else value

    return {text(k): text(v) for k, v in (properties or {}).items()}


def split_entity(queue: str) -> tuple[str, ServiceBusSubQueue | None]:
    """``orders/$deadletterqueue`` → (``orders``, DEAD_LETTER), as devhost's local bus names it."""
    if queue.lower().endswith(DEAD_LETTER_SUFFIX):
        return queue[: -len(DEAD_LETTER_SUFFIX)], ServiceBusSubQueue.DEAD_LETTER
    return queue, None


def _message_bytes(message: ServiceBusReceivedMessage) -> bytes:
    body: Any = message.body
    if message.body_type == AmqpMessageBodyType.DATA:
        return b"".join(bytes(section) for section in body)
    return body if isinstance(body, bytes) else str(body or "").encode()


def _devhost_dead_letter(lock_token: str, reason: str, description: str) -> bool:
    try:
        from devhost.servicebus_broker import dead_letter_in_flight  # noqa: PLC0415 - devhost only
    except ImportError:
        return False
    return dead_letter_in_flight(lock_token, reason, description)


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
        body: str,
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
        if _devhost_dead_letter(lock_token, reason, description):
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

    def peek(self, queue: str, limit: int) -> list[BrokerMessage]:
        name, sub_queue = split_entity(queue)
        with self.client.get_queue_receiver(name, sub_queue=sub_queue) as receiver:
            peeked: list[BrokerMessage] = []
            while len(peeked) < limit:
                batch = receiver.peek_messages(
                    max_message_count=min(limit - len(peeked), 100),
                    sequence_number=peeked[-1].sequence_number + 1 if peeked else 0,
                )
                if not batch:
                    break
                peeked += [broker_message(m) for m in batch]
            return peeked

    def resubmit_dead_letter(self, queue: str, message_id: str) -> bool:
        """Move one dead-lettered message back to its queue under a new MessageId (the old one
        may still be in the duplicate-detection window). False if it is not there."""
        with self.client.get_queue_receiver(
            queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=1
        ) as receiver:
            held: list[ServiceBusReceivedMessage] = []
            try:
                for message in receiver:
                    if message.message_id != message_id:
                        held.append(message)
                        continue
                    copy = broker_message(message)
                    self.send(
                        queue,
                        copy.body.decode(),
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


def client_from_connection(
    connection: str | None, namespace: str | None, credential: Any, **options: Any
) -> ServiceBusClient:
    """A connection string (local brokers and emulators), else the namespace with an identity.
    ``options``: the client's keyword arguments, e.g. its retry settings."""
    if connection:
        return ServiceBusClient.from_connection_string(connection, **options)
    if namespace:
        return ServiceBusClient(namespace, credential, **options)
    raise ValueError(
        "Service Bus is not configured: set ServiceBusConnection__fullyQualifiedNamespace "
        "(Azure, managed identity) or ServiceBusConnection (a local broker's connection string)"
    )
