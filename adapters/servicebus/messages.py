"""The one model of a Service Bus message as this project receives it, and the one decoder from
the SDK's received message.

The app's operator tools, the agent and devhost's trigger source all read messages through
``ReceivedMessage``, whether the local bus (``local_bus.py``) or a broker (``from_sdk``)
delivered them, so a message reads the same on every profile.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage
from azure.servicebus.amqp import AmqpMessageBodyType

DEAD_LETTER_SUFFIX = "/$deadletterqueue"
MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"
# A peeked message holds no lock; this moment, always in the past, says so without an Optional.
NOT_LOCKED = datetime.min.replace(tzinfo=UTC)
# How long a receive waits for the first message: short, so a settlement queued behind it on the
# same receiver waits little, and a shutdown is seen soon.
RECEIVE_WAIT_SECONDS = 0.2
_MICROSECOND = timedelta(microseconds=1)


class MessageLockLost(Exception):
    """The lock expired, or the lock token is no longer the message's current one."""


class MessageAlreadySettled(MessageLockLost):
    """The message has left the entity it was received from: completed (gone), or moved to the
    dead-letter queue (by a holder of its lock, such as the function, or by the delivery limit).

    Nothing will be redelivered, unlike a lock that expired on a message still in the entity. A
    ``MessageLockLost``, so that callers that only care whether the settlement happened need not
    tell the two apart.
    """


class QueueNotFound(Exception):
    """The queue was never declared."""


@dataclass(frozen=True)
class QueueConfig:
    name: str
    max_delivery_count: int = 10
    lock_duration: timedelta = timedelta(seconds=30)
    duplicate_detection_window: timedelta | None = timedelta(minutes=10)
    # None: Service Bus's default, TimeSpan.MaxValue (messages never expire).
    default_message_ttl: timedelta | None = None
    dead_letter_on_expiration: bool = False

    def __post_init__(self) -> None:
        # Entity paths are case-insensitive, so the stored name is the lower-case one.
        object.__setattr__(self, "name", self.name.strip().lower())
        if not self.name or "$" in self.name:
            raise ValueError(f"invalid queue name {self.name!r}")
        if self.max_delivery_count < 1:
            raise ValueError("max_delivery_count must be at least 1")
        if self.lock_duration < _MICROSECOND:
            raise ValueError("lock_duration must be positive")
        if self.duplicate_detection_window is not None and self.duplicate_detection_window < _MICROSECOND:
            raise ValueError("duplicate_detection_window must be positive (or None to turn it off)")


@dataclass(frozen=True)
class ReceivedMessage:
    queue: str
    sequence_number: int
    message_id: str
    body: bytes
    correlation_id: str | None
    content_type: str | None
    subject: str | None
    reply_to: str | None
    application_properties: dict[str, Any]
    # Counts this delivery too (1 first), as Functions' DeliveryCount and the .NET SDK do.
    delivery_count: int
    enqueued_time: datetime
    scheduled_enqueue_time: datetime | None
    locked_until: datetime
    lock_token: str
    dead_letter_reason: str | None
    dead_letter_error_description: str | None


def dead_letter_queue(queue: str) -> str:
    """The entity path of a queue's dead-letter sub-queue."""
    return queue.lower() + DEAD_LETTER_SUFFIX


def split_entity(path: str) -> tuple[str, bool]:
    """``orders/$deadletterqueue`` → (``orders``, True): the queue, and whether it is its DLQ."""
    entity = path.strip().lower()
    if entity.endswith(DEAD_LETTER_SUFFIX):
        return entity[: -len(DEAD_LETTER_SUFFIX)], True
    return entity, False


def text_properties(properties: dict[Any, Any] | None) -> dict[str, Any]:
    """AMQP keys and string values arrive as bytes; the app only ever sets strings."""

    def text(value: Any) -> Any:
        return value.decode() if isinstance(value, bytes) else value

    return {text(k): text(v) for k, v in (properties or {}).items()}


def message_bytes(message: ServiceBusReceivedMessage) -> bytes:
    """The body as bytes, whatever AMQP body the sender used: data sections (what the SDKs
    send), or a single value (a JMS TextMessage, say); anything else reads as empty, so the
    app rejects it with a reason rather than the receive failing."""
    body: Any = message.body
    if message.body_type == AmqpMessageBodyType.DATA:
        return b"".join(bytes(section) for section in body)
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return b""


def from_sdk(queue: str, message: ServiceBusReceivedMessage) -> ReceivedMessage:
    """The SDK's received (or peeked) message in this project's model. Times are always UTC;
    a peeked message has no lock (``NOT_LOCKED``, an empty lock token)."""
    return ReceivedMessage(
        queue=queue,
        sequence_number=message.sequence_number or 0,
        message_id=str(message.message_id),
        body=message_bytes(message),
        correlation_id=message.correlation_id,
        content_type=message.content_type,
        subject=message.subject,
        reply_to=message.reply_to,
        application_properties=text_properties(message.application_properties),
        # The AMQP header counts earlier attempts (0 first).
        delivery_count=(message.delivery_count or 0) + 1,
        enqueued_time=_utc_or_epoch(message.enqueued_time_utc),
        scheduled_enqueue_time=message.scheduled_enqueue_time_utc,
        locked_until=message.locked_until_utc or NOT_LOCKED,
        lock_token=str(message.lock_token or ""),
        dead_letter_reason=message.dead_letter_reason,
        dead_letter_error_description=message.dead_letter_error_description,
    )


def _utc_or_epoch(moment: datetime | None) -> datetime:
    return moment if moment is not None else datetime.fromtimestamp(0, UTC)
