"""AMQP 1.0 messages handled section by section.

The broker stores each message as the bytes the client sent and only re-encodes the sections it
must change (header, message annotations, and application properties when dead-lettering), so
properties, application properties and the body reach the receiver byte for byte as sent.
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from proton import Array, Data, DataException, Described, symbol, timestamp, ubyte, uint, ulong

HEADER = 0x70
DELIVERY_ANNOTATIONS = 0x71
MESSAGE_ANNOTATIONS = 0x72
PROPERTIES = 0x73
APPLICATION_PROPERTIES = 0x74
DATA = 0x75
FOOTER = 0x78
_BODY = (DATA, 0x76, 0x77)
_UNREAD = (0x76, 0x77)  # amqp-sequence and amqp-value bodies: stored, never decoded

SCHEDULED_ENQUEUE_TIME = "x-opt-scheduled-enqueue-time"
MESSAGE_STATE = "x-opt-message-state"
_MAX_UINT = 2**32 - 1


@dataclass(frozen=True)
class Section:
    code: int
    raw: bytes
    value: Any


@dataclass(frozen=True)
class Facts:
    """What the broker needs to know about a message when it arrives."""

    message_id: str | None
    time_to_live: timedelta | None
    scheduled_enqueue_ms: int | None


def split_sections(payload: bytes) -> list[Section]:
    """The message's sections, each with its encoding; the body's values are left undecoded
    (``None``) except a data section's bytes, which a batch is made of.

    Service Bus stores any AMQP body as it came, and proton's Python decoder cannot build some
    valid ones (a map with a binary key: a memoryview is not hashable), so the broker never
    decodes a value or sequence body it has no need to read.
    """
    data = Data()
    sections = []
    offset = 0
    while offset < len(payload):
        data.clear()
        try:
            consumed = data.decode(payload[offset:])
            data.rewind()
            data.next()
            # Clients address sections by their numeric descriptors (the SDK always does).
            if data.type() != Data.DESCRIBED:
                raise ValueError("not an AMQP message: expected a described section")
            data.enter()
            data.next()
            descriptor = data.get_object()
            if not isinstance(descriptor, int):
                raise ValueError("not an AMQP message: expected a section with a numeric descriptor")
            code = int(descriptor)
            if not HEADER <= code <= FOOTER:
                raise ValueError(f"not an AMQP message section: descriptor 0x{code:x}")
            value = None
            if code not in _UNREAD:
                data.next()
                value = owned(data.get_object())
        except DataException as error:
            raise ValueError(f"not an AMQP message: {error}") from None
        sections.append(Section(code, payload[offset : offset + consumed], value))
        offset += consumed
    return sections


def owned(value: Any) -> Any:
    """A copy that outlives the decoder: proton returns binaries as views into its own buffer."""
    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, list):
        return [owned(item) for item in value]
    if isinstance(value, dict):
        return {key: owned(item) for key, item in value.items()}
    if isinstance(value, Described):
        return Described(value.descriptor, owned(value.value))
    if isinstance(value, Array):
        return Array(value.descriptor, value.type, *[owned(item) for item in value.elements])
    return value


def unpack_batch(payload: bytes) -> list[bytes]:
    """The messages of one transfer: one, or each message of a batch.

    The SDK sends a batch with message format 0x80013700: a body of data sections that each hold
    an encoded message, under an envelope that repeats the first message's message-id and
    group-id (no other property: not its TTL's creation and expiry times, for one). Proton's Python
    API does not expose the message format, so a batch is recognised by that shape: every body
    section is a data section holding a whole AMQP message, and every property the envelope sets
    is the first message's. A single message has that shape only if its body is itself an
    encoded AMQP message carrying the same ids.
    """
    sections = split_sections(payload)
    bodies = [s for s in sections if s.code in _BODY]
    if not bodies or any(s.code != DATA for s in bodies):
        return [payload]
    inner = [bytes(s.value) for s in bodies]
    try:
        parsed = [split_sections(message) for message in inner]
    except ValueError:
        return [payload]
    if not all(any(s.code in _BODY for s in message) for message in parsed):
        return [payload]
    envelope = next((s.value for s in sections if s.code == PROPERTIES), None) or []
    first = next((s.value for s in parsed[0] if s.code == PROPERTIES), None) or []
    first = [*first, *[None] * (len(envelope) - len(first))]
    if any(value is not None and value != first[i] for i, value in enumerate(envelope)):
        return [payload]
    return inner


def facts(payload: bytes) -> Facts:
    message_id = None
    ttl = None
    scheduled = None
    for section in split_sections(payload):
        if section.code == PROPERTIES and section.value and section.value[0] is not None:
            message_id = str(section.value[0])
        elif section.code == HEADER and len(section.value) > 2 and section.value[2] is not None:
            ttl = timedelta(milliseconds=int(section.value[2]))
        elif section.code == MESSAGE_ANNOTATIONS and section.value:
            when = section.value.get(symbol(SCHEDULED_ENQUEUE_TIME))
            scheduled = int(when) if when is not None else None
    return Facts(message_id=message_id, time_to_live=ttl, scheduled_enqueue_ms=scheduled)


def header_size(payload: bytes) -> int:
    """The bytes of every section but the body: what Service Bus counts as the message's header
    (system and user properties alike)."""
    return sum(len(s.raw) for s in split_sections(payload) if s.code not in _BODY)


def largest_application_property(payload: bytes) -> tuple[str, int] | None:
    """The application property whose encoded value is largest, with that size in bytes."""
    largest: tuple[str, int] | None = None
    for section in split_sections(payload):
        if section.code != APPLICATION_PROPERTIES or not section.value:
            continue
        for key, value in section.value.items():
            data = Data()
            data.put_object(value)
            size = len(data.encode())
            if largest is None or size > largest[1]:
                largest = (str(key), size)
    return largest


def _encode(code: int, value: Any) -> bytes:
    data = Data()
    data.put_object(Described(ulong(code), value))
    return data.encode()


def for_delivery(
    payload: bytes, *, delivery_count: int, annotations: dict[str, Any], time_to_live_ms: int | None
) -> bytes:
    """The message as a receiver sees it: the broker's header counts and annotations merged in.

    ``time_to_live_ms`` is the TTL the broker applies (the message's own, capped by the entity's
    default, or the default when the message had none): Service Bus hands that back in the header,
    and the SDK computes ``expires_at_utc`` as the enqueued time plus it. ``None`` (no TTL
    anywhere, or one the header's uint milliseconds cannot hold) leaves the header's field out.
    """
    sections = split_sections(payload)
    header: list[Any] = [None, None, None, None, None]
    merged: dict[Any, Any] = {}
    rest = []
    for section in sections:
        if section.code == HEADER:
            header[: len(section.value)] = section.value
        elif section.code == MESSAGE_ANNOTATIONS:
            merged.update(section.value or {})
        elif section.code != DELIVERY_ANNOTATIONS:  # hop-by-hop: they were for the broker
            rest.append(section.raw)
    header[0] = bool(header[0]) if header[0] is not None else None
    header[1] = ubyte(int(header[1])) if header[1] is not None else None
    fits = time_to_live_ms is not None and 0 < time_to_live_ms <= _MAX_UINT
    header[2] = uint(time_to_live_ms) if time_to_live_ms is not None and fits else None
    header[3] = delivery_count == 0
    header[4] = uint(delivery_count)
    for key, value in annotations.items():
        merged[symbol(key)] = value
    return b"".join([_encode(HEADER, header), _encode(MESSAGE_ANNOTATIONS, merged), *rest])


def with_application_properties(payload: bytes, extra: dict[str, str]) -> bytes:
    """The message with properties added (dead-letter reasons travel as application properties)."""
    sections = split_sections(payload)
    existing: dict[Any, Any] = {}
    for section in sections:
        if section.code == APPLICATION_PROPERTIES:
            existing.update(section.value or {})
    existing.update(extra)
    encoded = _encode(APPLICATION_PROPERTIES, existing)
    out = [s.raw for s in sections if s.code < APPLICATION_PROPERTIES]
    out.append(encoded)
    out.extend(s.raw for s in sections if s.code > APPLICATION_PROPERTIES)
    return b"".join(out)


def ms(seconds: float) -> timestamp:
    """An AMQP timestamp (milliseconds since the epoch) from ``time.time()`` seconds."""
    return timestamp(round(seconds * 1000))
