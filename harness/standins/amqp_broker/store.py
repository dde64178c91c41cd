"""The broker's queues, in memory, with Service Bus peek-lock semantics.

Nothing here knows about connections or links: the AMQP side calls these methods on the reactor
thread, and tests may read depths from any thread, so every public method takes the one lock.
Times are the broker's clock (``clock.Clock``): wall-clock seconds, as lock expiries travel to
clients as wall-clock stamps, plus whatever a test moved it forward by.
"""

import heapq
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from adapters.servicebus.messages import DEAD_LETTER_SUFFIX
from harness.standins.amqp_broker import codec, limits
from harness.standins.amqp_broker.config import QueueSettings

MAX_DELIVERY_COUNT_EXCEEDED = "MaxDeliveryCountExceeded"
TTL_EXPIRED = "TTLExpiredException"


class BrokerError(Exception):
    """A failure the client must see with its AMQP error condition."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


def not_found(entity: str) -> BrokerError:
    return BrokerError("amqp:not-found", f"The messaging entity '{entity}' could not be found.")


def lock_lost(entity: str) -> BrokerError:
    return BrokerError(
        "com.microsoft:message-lock-lost",
        f"The lock supplied is invalid: it expired, or the message was already settled ({entity}).",
    )


def check_size(payload: bytes) -> None:
    """Refuse a message over the Standard tier's limit as Service Bus does. What counts is the
    whole transfer: every section of the message, and a batch as one message."""
    if len(payload) > limits.MAX_MESSAGE_SIZE:
        raise BrokerError(
            limits.MESSAGE_SIZE_EXCEEDED,
            f"The received message (size:{len(payload)} bytes) exceeds the limit "
            f"({limits.MAX_MESSAGE_SIZE} bytes) currently allowed on the link.",
        )


def check_properties(message: bytes) -> None:
    """Refuse one message whose properties are over Service Bus's quotas (``limits`` has the
    sources), with the error the service answers each with."""
    header = codec.header_size(message)
    if header > limits.MAX_HEADER_SIZE:
        raise BrokerError(
            limits.MESSAGE_SIZE_EXCEEDED,
            "A serialization error occurred while processing the message header stream. The "
            f"serialization process return the following message: The size quota for this stream "
            f"({limits.MAX_HEADER_SIZE}) has been exceeded. (header: {header} bytes)",
        )
    largest = codec.largest_application_property(message)
    if largest is not None and largest[1] > limits.MAX_PROPERTY_SIZE:
        name, size = largest
        raise BrokerError(
            limits.PROPERTY_TOO_LARGE,
            "The service was unable to process the request; please retry the operation. "
            f"(application property {name!r}: {size} bytes; the most is {limits.MAX_PROPERTY_SIZE})",
        )


@dataclass
class _Message:
    sequence_number: int
    payload: bytes
    enqueued_at: float
    visible_at: float
    expires_at: float | None
    attempts: int = 0  # how many times it was handed out; the header shows the earlier ones
    lock_token: uuid.UUID | None = None
    locked_until: float = 0.0
    dead_letter_source: str | None = None
    scheduled: bool = False  # not yet visible: not on the ready heap


@dataclass(frozen=True)
class Lease:
    """A message handed to a receiver: the bytes to transfer and, in peek-lock, its lock."""

    sequence_number: int
    wire: bytes
    lock_token: uuid.UUID | None


class _Entity:
    def __init__(self, name: str, settings: QueueSettings, *, dead_letter: "_Entity | None") -> None:
        self.name = name
        self.settings = settings
        self.dead_letter = dead_letter  # None for a dead-letter queue itself
        self.messages: dict[int, _Message] = {}
        self.ready: list[int] = []  # heap of sequence numbers; stale entries are skipped
        self.locks: dict[uuid.UUID, int] = {}
        self.seen_ids: dict[str, float] = {}  # duplicate detection: message id -> forget at

    def make_ready(self, message: _Message) -> None:
        message.lock_token = None
        message.locked_until = 0.0
        heapq.heappush(self.ready, message.sequence_number)

    def wire(self, message: _Message, *, delivery_count: int) -> bytes:
        annotations: dict[str, Any] = {
            "x-opt-sequence-number": message.sequence_number,
            "x-opt-enqueued-time": codec.ms(message.enqueued_at),
        }
        if message.lock_token is not None:
            annotations["x-opt-locked-until"] = codec.ms(message.locked_until)
        if message.dead_letter_source is not None:
            annotations["x-opt-deadletter-source"] = message.dead_letter_source
        # Service Bus reports the state it keeps (0 active, 1 deferred, 2 scheduled); the SDK reads
        # it as ServiceBusReceivedMessage.state. Only a peek can see a scheduled message.
        annotations[codec.MESSAGE_STATE] = 2 if message.scheduled else 0
        ttl = None
        if message.expires_at is not None:
            ttl = round((message.expires_at - message.enqueued_at) * 1000)
        return codec.for_delivery(
            message.payload, delivery_count=delivery_count, annotations=annotations, time_to_live_ms=ttl
        )


class Store:
    def __init__(self, queues: Iterable[QueueSettings]) -> None:
        self._lock = threading.Lock()
        # Told of every lock renewal, so a test can wait for renewals instead of polling for them.
        self._renewed = threading.Condition(self._lock)
        self._entities: dict[str, _Entity] = {}
        self._next_sequence = 1
        for settings in queues:
            dlq = _Entity(settings.name + DEAD_LETTER_SUFFIX, settings, dead_letter=None)
            self._entities[dlq.name] = dlq
            self._entities[settings.name] = _Entity(settings.name, settings, dead_letter=dlq)

    def has(self, entity: str) -> bool:
        return entity in self._entities

    def _entity(self, name: str) -> _Entity:
        entity = self._entities.get(name)
        if entity is None:
            raise not_found(name)
        return entity

    # --- sending ---------------------------------------------------------------------------

    def send(self, name: str, payload: bytes, now: float) -> int | None:
        """Enqueue one message; ``None`` when duplicate detection dropped it (as Service Bus
        does: the sender is told it was accepted)."""
        with self._lock:
            entity = self._entity(name)
            if entity.dead_letter is None:
                raise BrokerError("amqp:not-allowed", f"cannot send to the dead-letter queue '{name}'")
            check_properties(payload)
            facts = codec.facts(payload)
            window = entity.settings.duplicate_detection_window
            if window is not None and facts.message_id is not None:
                # Insertion order is expiry order (one window per queue), so expired ids are in front.
                while entity.seen_ids and next(iter(entity.seen_ids.values())) <= now:
                    del entity.seen_ids[next(iter(entity.seen_ids))]
                if facts.message_id in entity.seen_ids:
                    return None
                entity.seen_ids[facts.message_id] = now + window.total_seconds()
            visible_at = now
            if facts.scheduled_enqueue_ms is not None:
                visible_at = max(now, facts.scheduled_enqueue_ms / 1000)
            ttls = [t.total_seconds() for t in (facts.time_to_live, entity.settings.default_message_ttl) if t]
            message = _Message(
                sequence_number=self._next_sequence,
                payload=payload,
                enqueued_at=visible_at,
                visible_at=visible_at,
                expires_at=visible_at + min(ttls) if ttls else None,
                scheduled=visible_at > now,
            )
            self._next_sequence += 1
            entity.messages[message.sequence_number] = message
            if not message.scheduled:
                heapq.heappush(entity.ready, message.sequence_number)
            return message.sequence_number

    def cancel_scheduled(self, name: str, sequence_numbers: Iterable[int]) -> None:
        with self._lock:
            entity = self._entity(name)
            for number in sequence_numbers:
                message = entity.messages.get(number)
                if message is not None and message.scheduled:
                    del entity.messages[number]

    # --- receiving -------------------------------------------------------------------------

    def take(self, name: str, now: float, *, lock: bool) -> Lease | None:
        """The next available message: locked (peek-lock) or removed (receive-and-delete)."""
        with self._lock:
            entity = self._entity(name)
            while entity.ready:
                number = heapq.heappop(entity.ready)
                message = entity.messages.get(number)
                if message is None or message.lock_token is not None:
                    continue
                if message.expires_at is not None and message.expires_at <= now:
                    self._expire(entity, message)
                    continue
                delivery_count = message.attempts
                message.attempts += 1
                if not lock:
                    del entity.messages[number]
                    return Lease(number, entity.wire(message, delivery_count=delivery_count), None)
                token = uuid.uuid4()
                message.lock_token = token
                message.locked_until = now + entity.settings.lock_duration.total_seconds()
                entity.locks[token] = number
                return Lease(number, entity.wire(message, delivery_count=delivery_count), token)
            return None

    def peek(self, name: str, from_sequence: int, count: int) -> list[bytes]:
        with self._lock:
            entity = self._entity(name)
            numbers = sorted(n for n in entity.messages if n >= from_sequence)[: max(count, 0)]
            out = []
            for number in numbers:
                message = entity.messages[number]
                previous = message.attempts - (1 if message.lock_token is not None else 0)
                out.append(entity.wire(message, delivery_count=previous))
            return out

    # --- settling --------------------------------------------------------------------------

    def _locked(self, entity: _Entity, token: uuid.UUID, now: float) -> _Message:
        number = entity.locks.get(token)
        message = entity.messages.get(number) if number is not None else None
        if message is None or message.lock_token != token or message.locked_until <= now:
            raise lock_lost(entity.name)
        return message

    def _unlock(self, entity: _Entity, message: _Message) -> None:
        if message.lock_token is not None:
            entity.locks.pop(message.lock_token, None)

    def complete(self, name: str, token: uuid.UUID, now: float) -> None:
        with self._lock:
            entity = self._entity(name)
            message = self._locked(entity, token, now)
            self._unlock(entity, message)
            del entity.messages[message.sequence_number]

    def abandon(self, name: str, token: uuid.UUID, now: float) -> None:
        with self._lock:
            entity = self._entity(name)
            self._return(entity, self._locked(entity, token, now))

    def release(self, name: str, token: uuid.UUID, now: float) -> None:
        """The receiver gave back a message it never looked at: it does not count as a delivery."""
        with self._lock:
            entity = self._entity(name)
            message = self._locked(entity, token, now)
            message.attempts -= 1
            self._return(entity, message)

    def dead_letter(self, name: str, token: uuid.UUID, reason: str, description: str, now: float) -> None:
        with self._lock:
            entity = self._entity(name)
            message = self._locked(entity, token, now)
            if entity.dead_letter is None:
                raise BrokerError("amqp:not-allowed", "a dead-lettered message cannot be dead-lettered again")
            self._unlock(entity, message)
            self._move_to_dead_letter(entity, message, reason, description)

    def renew(self, name: str, token: uuid.UUID, now: float) -> float:
        with self._lock:
            entity = self._entity(name)
            message = self._locked(entity, token, now)
            message.locked_until = now + entity.settings.lock_duration.total_seconds()
            self._renewed.notify_all()
            return message.locked_until

    def wait_for_locks(self, name: str, tokens: Iterable[uuid.UUID], past: float, timeout: float) -> bool:
        """Until each of ``tokens`` holds its message's lock beyond ``past`` (False if ``timeout``
        seconds pass first, or a lock is gone)."""
        wanted = list(tokens)

        def held() -> bool:
            entity = self._entity(name)
            messages = [entity.messages.get(entity.locks.get(token, -1)) for token in wanted]
            return all(m is not None and m.locked_until > past for m in messages)

        with self._renewed:
            return self._renewed.wait_for(held, timeout)

    def _return(self, entity: _Entity, message: _Message) -> None:
        """Back on the queue after an abandon or a lost lock, unless its deliveries are used up."""
        self._unlock(entity, message)
        limit = entity.settings.max_delivery_count
        if entity.dead_letter is not None and message.attempts >= limit:
            description = f"Message could not be consumed after {limit} delivery attempts."
            self._move_to_dead_letter(entity, message, MAX_DELIVERY_COUNT_EXCEEDED, description)
        else:
            entity.make_ready(message)

    def _move_to_dead_letter(self, entity: _Entity, message: _Message, reason: str, description: str) -> None:
        assert entity.dead_letter is not None
        del entity.messages[message.sequence_number]
        payload = codec.with_application_properties(
            message.payload, {"DeadLetterReason": reason, "DeadLetterErrorDescription": description}
        )
        moved = _Message(
            sequence_number=message.sequence_number,
            payload=payload,
            enqueued_at=message.enqueued_at,
            visible_at=message.visible_at,
            expires_at=None,  # the dead-letter queue keeps what it is given
            attempts=message.attempts,
            dead_letter_source=entity.name,
        )
        entity.dead_letter.messages[moved.sequence_number] = moved
        entity.dead_letter.make_ready(moved)

    def _expire(self, entity: _Entity, message: _Message) -> None:
        if entity.settings.dead_letter_on_expiration and entity.dead_letter is not None:
            self._move_to_dead_letter(
                entity, message, TTL_EXPIRED, "The message expired and was dead lettered."
            )
        else:
            del entity.messages[message.sequence_number]

    # --- timers ----------------------------------------------------------------------------

    def sweep(self, now: float) -> None:
        """Expired locks, expired messages and scheduled messages whose time has come."""
        with self._lock:
            for entity in self._entities.values():
                for number in list(entity.locks.values()):
                    message = entity.messages[number]
                    if message.locked_until <= now:
                        self._return(entity, message)
                for message in list(entity.messages.values()):
                    if message.lock_token is not None:
                        continue
                    if message.expires_at is not None and message.expires_at <= now:
                        self._expire(entity, message)
                    elif message.scheduled and message.visible_at <= now:
                        message.scheduled = False
                        heapq.heappush(entity.ready, message.sequence_number)

    # --- inspection ------------------------------------------------------------------------

    def depth(self, name: str) -> int:
        """Messages on the entity, locked and scheduled ones included."""
        with self._lock:
            return len(self._entity(name).messages)
