"""Azure Service Bus limits: one table, read by the local bus (the embedded profile, which ships)
and by the AMQP test broker (standins/amqp_broker/, which does not), so both refuse exactly what
Service Bus refuses. Here, in adapters/, because the package may hold it and the broker may
import it (tests/unit/test_purity.py: nothing shipped imports the harness; the reverse is free).

Each row names its source. Pure data: no Azure import.
"""

from dataclasses import dataclass
from datetime import timedelta

QUOTAS = "https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas"
QUEUE_PROPERTIES = (
    "https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.administration.queueproperties"
)
SDK_MESSAGE = "azure-servicebus azure/servicebus/_common/message.py (MESSAGE_PROPERTY_MAX_LENGTH)"


@dataclass(frozen=True)
class Limit:
    """One row: what is bounded, its bounds (inclusive; None for no bound), and the source."""

    name: str
    low: int | timedelta | None
    high: int | timedelta | None
    source: str


KIB = 1024
# Message size, whole encoded message: Standard 256 KB, Premium 100 MB (the quotas page).
MESSAGE_SIZE_STANDARD = Limit("message size (Standard)", None, 256 * KIB, QUOTAS)
MESSAGE_SIZE_PREMIUM = Limit("message size (Premium)", None, 100 * KIB * KIB, QUOTAS)
# "Message property size ... Maximum header size: 64 KB; maximum size of each property: 32 KB"
# (the quotas page), system properties counted in the header.
HEADER_SIZE = Limit("message header size", None, 64 * KIB, QUOTAS)
PROPERTY_SIZE = Limit("application property size", None, 32 * KIB, QUOTAS)
# The SDK refuses longer IDs itself (ValueError "<name> cannot be longer than 128 characters.");
# the quotas page: "Size of ... SessionID, MessageID ... 128 characters".
ID_LENGTH = Limit("MessageId, CorrelationId, SessionId, Subject, ReplyTo, To length", 1, 128, SDK_MESSAGE)
# QueueProperties remarks: LockDuration "Max value is 5 minutes"; the portal's floor 5 s.
LOCK_DURATION = Limit("LockDuration", timedelta(seconds=5), timedelta(minutes=5), QUEUE_PROPERTIES)
# "Max value is 7 days and minimum is 20 seconds."
DUPLICATE_DETECTION_WINDOW = Limit(
    "DuplicateDetectionHistoryTimeWindow", timedelta(seconds=20), timedelta(days=7), QUEUE_PROPERTIES
)
# "Minimum value is 1"; an Int32, so 2147483647 is the most it holds (no documented lower cap
# was found).
MAX_DELIVERY_COUNT = Limit("MaxDeliveryCount", 1, 2**31 - 1, QUEUE_PROPERTIES)
# A positive duration; the SDK sends a message's TTL in whole seconds.
DEFAULT_MESSAGE_TTL = Limit("DefaultMessageTimeToLive", timedelta(seconds=1), None, QUEUE_PROPERTIES)

TABLE: tuple[Limit, ...] = (
    MESSAGE_SIZE_STANDARD,
    MESSAGE_SIZE_PREMIUM,
    HEADER_SIZE,
    PROPERTY_SIZE,
    ID_LENGTH,
    LOCK_DURATION,
    DUPLICATE_DETECTION_WINDOW,
    MAX_DELIVERY_COUNT,
    DEFAULT_MESSAGE_TTL,
)


def outside(limit: Limit, value: int | timedelta) -> str | None:
    """Why ``value`` breaks ``limit``, in the words of a refusal; None when it is within."""
    if limit.low is not None and value < limit.low:  # type: ignore[operator]
        return f"{limit.name} {value} is below the minimum {limit.low} ({limit.source})"
    if limit.high is not None and value > limit.high:  # type: ignore[operator]
        return f"{limit.name} {value} is above the maximum {limit.high} ({limit.source})"
    return None


def duration_bounds(limit: Limit) -> tuple[timedelta, timedelta]:
    if not isinstance(limit.low, timedelta) or not isinstance(limit.high, timedelta):
        raise TypeError(f"{limit.name} is not bounded by durations on both sides")
    return limit.low, limit.high


def most(limit: Limit) -> int:
    """The upper bound of a count or size row."""
    if not isinstance(limit.high, int):
        raise TypeError(f"{limit.name} has no upper bound in units")
    return limit.high
