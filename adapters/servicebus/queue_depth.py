"""A Service Bus queue's active-message count, for admission control (C3; ``domain.ports.QueueDepth``).

Azure (Entra auth): an Azure Resource Manager read of the queue resource, whose
``properties.countDetails.activeMessageCount`` needs only ``Microsoft.ServiceBus/namespaces/
queues/read``: the Reader role scoped to that one queue (infra/modules/rbac.bicep). The data
plane's ``ServiceBusAdministrationClient.get_queue_runtime_properties`` would need Service Bus's
Manage right, which among built-in roles only Azure Service Bus Data Owner has.

A connection string (the Service Bus emulator, a local broker) carries its own rights: there the
administration client reads the count.
"""

from typing import Any

from azure.core import PipelineClient
from azure.core.pipeline.policies import BearerTokenCredentialPolicy, RetryPolicy
from azure.core.rest import HttpRequest
from azure.servicebus.management import ServiceBusAdministrationClient

ARM_ENDPOINT = "https://management.azure.com"
ARM_SCOPE = "https://management.azure.com/.default"
# The Service Bus resource provider's generally available API with countDetails.
ARM_API_VERSION = "2021-11-01"


def _queue_of(resource_id: str) -> str:
    parts = resource_id.strip("/").split("/")
    if len(parts) < 10 or parts[-2].lower() != "queues":
        raise ValueError(f"{resource_id!r} is not a Microsoft.ServiceBus/namespaces/queues resource ID")
    return parts[-1]


class ArmQueueDepth:
    """One queue's count over ARM. ARM throttles reads per principal, hence the caller's cache."""

    def __init__(self, resource_id: str, credential: Any, *, timeout: float) -> None:
        self._resource_id = "/" + resource_id.strip("/")
        self._queue = _queue_of(resource_id)
        self._timeout = timeout
        self._client: PipelineClient[HttpRequest, Any] = PipelineClient(
            ARM_ENDPOINT,
            policies=[RetryPolicy(retry_total=1), BearerTokenCredentialPolicy(credential, ARM_SCOPE)],
        )

    def active_messages(self, queue: str) -> int:
        if queue.lower() != self._queue.lower():
            raise ValueError(f"this reads the queue {self._queue!r}, not {queue!r}")
        request = HttpRequest("GET", f"{self._resource_id}?api-version={ARM_API_VERSION}")
        response = self._client.send_request(
            request, connection_timeout=self._timeout, read_timeout=self._timeout
        )
        response.raise_for_status()
        return int(response.json()["properties"]["countDetails"]["activeMessageCount"])

    def close(self) -> None:
        self._client.close()


class AdminQueueDepth:
    """Counts through the administration client, for a connection string's own rights."""

    def __init__(self, connection_string: str) -> None:
        self._client = ServiceBusAdministrationClient.from_connection_string(connection_string)

    def active_messages(self, queue: str) -> int:
        return self._client.get_queue_runtime_properties(queue).active_message_count or 0

    def close(self) -> None:
        self._client.close()
