"""The Azure Service Bus **Standard tier** limits the broker enforces, with where each comes from.

The numbers are the rows of ``adapters/servicebus/limits.py``, the one table the local bus reads
too; what is here is how the broker answers each over AMQP.

The broker stands in for a Standard namespace, so a message or a queue definition that Azure would
refuse is refused here too, with the error Azure gives. These are Azure's limits, not the Service
Bus *emulator's* (which are narrower and are checked elsewhere).
"""

from datetime import timedelta

from adapters.servicebus import limits as table

# Maximum message size, Standard tier: 256 KB, counted over the whole encoded AMQP message
# (header, annotations, properties, application properties and body), which is what the service
# compares with the link's limit. Quotas:
# https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas
# The service advertises it as max-message-size on the attach of a sender's link (262144: see the
# attach frames in https://github.com/vcabbage/amqp/issues/56), and rejects a larger transfer with
# amqp:link:message-size-exceeded, "The received message (delivery-id:…, size:… bytes) exceeds the
# limit (262144 bytes) currently allowed on the link." (the disposition in
# https://github.com/Azure/azure-sdk-for-python/issues/5286 and the error in
# https://github.com/Azure/azure-sdk-for-python/issues/37916).
MAX_MESSAGE_SIZE = table.most(table.MESSAGE_SIZE_STANDARD)
MESSAGE_SIZE_EXCEEDED = "amqp:link:message-size-exceeded"

# Queue properties: the remarks of Azure.Messaging.ServiceBus.Administration.QueueProperties
# (https://github.com/Azure/azure-docs-sdk-dotnet/blob/master/xml/Azure.Messaging.ServiceBus.Administration/QueueProperties.xml,
# published under https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.administration.queueproperties).
#
# LockDuration: "Max value is 5 minutes. Default value is 60 seconds." (also
# https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.administration.createqueueoptions.lockduration).
# The 5-second floor is the Azure portal's minimum
# (https://github.com/Azure/azure-sdk-for-node/issues/1747); the data plane has been seen to take
# less (https://github.com/Azure/azure-service-bus/issues/22), so this floor is the conservative,
# documented one.
LOCK_DURATION = table.duration_bounds(table.LOCK_DURATION)

# MaxDeliveryCount: "Default value is 10. Minimum value is 1."; the property is an Int32, so
# 2147483647 is the most it can hold.
MAX_DELIVERY_COUNT = (1, table.most(table.MAX_DELIVERY_COUNT))

# DuplicateDetectionHistoryTimeWindow: "Max value is 7 days and minimum is 20 seconds." (also
# https://learn.microsoft.com/dotnet/api/azure.messaging.servicebus.administration.queueproperties.duplicatedetectionhistorytimewindow).
DUPLICATE_DETECTION_WINDOW = table.duration_bounds(table.DUPLICATE_DETECTION_WINDOW)

# DefaultMessageTimeToLive: "Default value is TimeSpan.MaxValue", so the broker sets no maximum.
# It must be a positive duration; the broker asks for at least a second, the resolution
# azure-servicebus sends a message's time-to-live in (whole seconds). The entity default is also
# the ceiling for a message's own TTL, and expiry counts from the enqueued time:
# https://learn.microsoft.com/azure/service-bus-messaging/message-expiration
DEFAULT_MESSAGE_TTL_MIN = (
    table.DEFAULT_MESSAGE_TTL.low
    if isinstance(table.DEFAULT_MESSAGE_TTL.low, timedelta)
    else timedelta(seconds=1)
)


# Message properties, every tier (the quotas page's "Message property size for a queue, topic, or
# subscription entity": https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas):
# each property at most 32 KB; all properties together at most 64 KB, counted over "the entire
# header of the brokered message", system properties (message ID, sequence number, ...) included;
# "The exception SerializationException is generated."
#
# Over AMQP the service answers each limit differently, and the broker follows what was observed:
# - the header over 64 KB: the transfer is rejected with amqp:link:message-size-exceeded, "A
#   serialization error occurred while processing the message header stream ... The size quota
#   for this stream (65536) has been exceeded." (the error reported in
#   https://github.com/rebus-org/Rebus.AzureServiceBus/issues/35), which azure-servicebus raises
#   as MessageSizeExceededError;
# - one property over 32 KB (but the header under 64 KB): the service rejects the transfer with an
#   error no client maps to a specific exception, described "The service was unable to process
#   the request; please retry the operation." (https://github.com/Azure/azure-sdk-for-net/issues/15325,
#   which found an AMQP rejection "with code 37"). The condition's name is not in any reference
#   found; the broker sends amqp:internal-error, which azure-servicebus, like the service's own
#   condition, maps to nothing specific: a retryable ServiceBusError, raised once its retries are
#   spent.
MAX_PROPERTY_SIZE = table.most(table.PROPERTY_SIZE)
MAX_HEADER_SIZE = table.most(table.HEADER_SIZE)
PROPERTY_TOO_LARGE = "amqp:internal-error"

# A session receiver on an entity that does not require sessions: the service refuses the attach
# (it answers the attach, then detaches the link with the error), and the SDK raises the
# detach's error from the receiver's open (azure-servicebus's pyamqp transport reads the session
# filter back from the answering attach, so the broker echoes the client's source, then detaches).
# The description is the service's wording as a public JavaScript test written against Azure
# quotes it ("cannot accept session if requiresSession is false"; found with the code search, no
# Microsoft document states it): "A sessionful message receiver cannot be created on an entity
# that does not require sessions. Ensure RequiresSession is set to true when creating a Queue or
# Subscription to enable sessionful behavior." The condition is not in any reference found; the
# broker uses amqp:not-allowed, the condition of the opposite mismatch, which .NET maps to
# InvalidOperationException. azure-servicebus raises it as ServiceBusError, not a specific class.
SESSION_NOT_REQUIRED = "amqp:not-allowed"
SESSION_NOT_REQUIRED_DESCRIPTION = (
    "A sessionful message receiver cannot be created on an entity that does not require sessions. "
    "Ensure RequiresSession is set to true when creating a Queue or Subscription to enable sessionful "
    "behavior."
)
