"""Azure Service Bus limits: one table, read by the local bus (the embedded profile, which ships)
and by the AMQP test broker (harness/standins/amqp_broker/, which does not), so both refuse exactly what
Service Bus refuses. Here, in adapters/, because the package may hold it and the broker may
import it (tests/unit/test_purity.py: nothing shipped imports the harness; the reverse is free).

Each row names its source. Where only Microsoft's SDKs check a limit before sending (and
azure-servicebus does not), the local bus, which plays the SDK's part too, refuses as they do and
the broker, which plays only the service's, takes it; the row says so (the empty MessageId, the
dead-letter texts). Pure data: no Azure import.
"""

from dataclasses import dataclass
from datetime import timedelta

QUOTAS = "https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas"
QUEUE_PROPERTIES = (
    "https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.administration.queueproperties"
)
SDK_MESSAGE = "azure-servicebus azure/servicebus/_common/message.py (MESSAGE_PROPERTY_MAX_LENGTH)"
ARM_QUEUE = "the ARM schema of Microsoft.ServiceBus/namespaces/queues (maxDeliveryCount: int32)"
SDK_DEAD_LETTER = (
    "Azure.Messaging.ServiceBus Constants.MaxDeadLetterReasonLength (4096), checked by"
    " ServiceBusReceiver.DeadLetterMessageAsync; azure-sdk-for-js maxDeadLetterReasonLength"
)
SCHEDULING = (
    "https://github.com/MicrosoftDocs/azure-docs/issues/67357 (no limit, per the messaging"
    " architect); https://github.com/Azure/azure-service-bus-go/issues/103 (DateTimeOffset.MaxValue)"
)


@dataclass(frozen=True)
class Limit:
    """One row: what is bounded, its bounds (inclusive; None for no bound), and the source."""

    name: str
    low: int | timedelta | None
    high: int | timedelta | None
    source: str


KIB = 1024
# Message size, whole encoded message: Standard 256 KB, Premium 100 MB (the quotas page). Both
# stand-ins play a Standard namespace (the Bicep's default SKU; Premium only with networkIsolation),
# so the Premium row is for reference: a 101 MiB body is refused by the Standard row already.
MESSAGE_SIZE_STANDARD = Limit("message size (Standard)", None, 256 * KIB, QUOTAS)
MESSAGE_SIZE_PREMIUM = Limit("message size (Premium)", None, 100 * KIB * KIB, QUOTAS)
# "Message property size ... Maximum header size: 64 KB; maximum size of each property: 32 KB"
# (the quotas page), system properties counted in the header.
HEADER_SIZE = Limit("message header size", None, 64 * KIB, QUOTAS)
PROPERTY_SIZE = Limit("application property size", None, 32 * KIB, QUOTAS)
# MessageId, SessionId, ReplyToSessionId, PartitionKey: "Maximum length is 128 characters" (the
# .NET ServiceBusMessage property docs), and azure-servicebus refuses a longer one itself
# (ValueError "<name> cannot be longer than 128 characters."). CorrelationId, Subject, ReplyTo and
# To have no documented length (searched: those properties' .NET docs, azure-servicebus's
# message.py, which checks none of them, the quotas page): only the 64 KB header bounds them.
# The floor, 1: Microsoft.Azure.ServiceBus refuses an empty MessageId client-side
# (Message.ValidateMessageId, "MessageIdIsNullOrEmptyOrOverMaxValue"); azure-servicebus does not,
# and the service's answer to one is not documented. So, as for the dead-letter texts, the local
# bus (the SDK's part) refuses it and the broker (the service's part) takes it.
ID_LENGTH = Limit("MessageId, SessionId, ReplyToSessionId, PartitionKey length", 1, 128, SDK_MESSAGE)
# QueueProperties remarks: LockDuration "Max value is 5 minutes"; the portal's floor 5 s.
LOCK_DURATION = Limit("LockDuration", timedelta(seconds=5), timedelta(minutes=5), QUEUE_PROPERTIES)
# "Max value is 7 days and minimum is 20 seconds."
DUPLICATE_DETECTION_WINDOW = Limit(
    "DuplicateDetectionHistoryTimeWindow", timedelta(seconds=20), timedelta(days=7), QUEUE_PROPERTIES
)
# "Minimum value is 1" (QueueProperties remarks; CreateQueueOptions.MaxDeliveryCount's setter
# asserts only AdministrationClientConstants.MinAllowedMaxDeliveryCount, 1). No maximum is
# documented: the ARM schema of Microsoft.ServiceBus/namespaces/queues has maxDeliveryCount as
# "integer", "format": "int32", with no maximum, so 2147483647 is the most it holds. Searched and
# not found: a maximum in the quotas page, the QueueProperties remarks, the ARM/REST schema,
# azure-servicebus's management models (no check), .NET's setter. The Service Bus *emulator*
# takes 1..10 (its Config-schema.json; harness/tools/iac/emulator.py), which is the emulator's limit, not
# Azure's: 100000 is within what Azure accepts as far as any source says.
MAX_DELIVERY_COUNT = Limit("MaxDeliveryCount", 1, 2**31 - 1, QUEUE_PROPERTIES + "; " + ARM_QUEUE)
# A positive duration; the SDK sends a message's TTL in whole seconds.
DEFAULT_MESSAGE_TTL = Limit("DefaultMessageTimeToLive", timedelta(seconds=1), None, QUEUE_PROPERTIES)

# Dead-letter reason and error description: at most 4096 characters each. Microsoft's SDKs refuse
# a longer one before sending (.NET: ArgumentOutOfRangeException "Maximum permitted length is
# 4096", documented on DeadLetterMessageAsync since azure-sdk-for-net#32396; the older
# Microsoft.Azure.ServiceBus and azure-sdk-for-js check the same constant). azure-servicebus
# (Python) does not check, and what the service answers to a longer one over AMQP is not
# documented (searched: the quotas page, the dead-letter-queues page, the SDK repositories'
# issues). So the local bus, which plays the SDK's part in the embedded profile, refuses a longer
# one as Microsoft's SDKs do; the AMQP test broker, which plays only the service's, takes it.
DEAD_LETTER_TEXT_LENGTH = Limit(
    "DeadLetterReason, DeadLetterErrorDescription length", None, 4096, SDK_DEAD_LETTER
)
# ScheduledEnqueueTimeUtc: no bound ("there is no limit set at the server side. It's technically
# the max value of the DateTimeOffset"), which is also the most a Python datetime holds: year 9999
# is accepted and stays scheduled. A time in the past enqueues at once (message-sequencing page).
SCHEDULED_ENQUEUE_TIME = Limit("ScheduledEnqueueTimeUtc", None, None, SCHEDULING)

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
    DEAD_LETTER_TEXT_LENGTH,
    SCHEDULED_ENQUEUE_TIME,
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
