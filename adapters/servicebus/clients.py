"""Which Service Bus the settings name, and a client for it: one rule for the app (sync) and the
agent (asyncio).

``ServiceBusConnection`` holding ``=`` is a connection string: a local broker or the emulator.
Otherwise the namespace is ``ServiceBusConnection__fullyQualifiedNamespace``, or the connection
itself (a namespace written there), reached with DefaultAzureCredential as the managed identity
``AZURE_CLIENT_ID`` names: no shared keys in Azure.
"""

from typing import Any

from azure.servicebus import ServiceBusClient
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient


def _connection_string(connection: str | None) -> str | None:
    return connection if connection and "=" in connection else None


def _namespace(connection: str | None, namespace: str | None) -> str:
    found = namespace or connection
    if not found:
        raise ValueError(
            "Service Bus is not configured: set ServiceBusConnection__fullyQualifiedNamespace "
            "(Azure, managed identity) or ServiceBusConnection (a local broker's connection string)"
        )
    return found


def servicebus_client(
    connection: str | None = None,
    *,
    namespace: str | None = None,
    managed_identity_client_id: str | None = None,
    **options: Any,
) -> ServiceBusClient:
    """The app's client. ``options``: the client's keyword arguments, e.g. its retry settings."""
    if (connection_string := _connection_string(connection)) is not None:
        return ServiceBusClient.from_connection_string(connection_string, **options)
    from azure.identity import DefaultAzureCredential  # noqa: PLC0415 - only against Azure

    credential = DefaultAzureCredential(managed_identity_client_id=managed_identity_client_id)
    return ServiceBusClient(_namespace(connection, namespace), credential, **options)


def async_servicebus_client(
    connection: str | None = None,
    *,
    namespace: str | None = None,
    managed_identity_client_id: str | None = None,
    **options: Any,
) -> AsyncServiceBusClient:
    """The agent's client, by the same rule as ``servicebus_client``."""
    if (connection_string := _connection_string(connection)) is not None:
        return AsyncServiceBusClient.from_connection_string(connection_string, **options)
    from azure.identity.aio import DefaultAzureCredential  # noqa: PLC0415 - only against Azure

    credential = DefaultAzureCredential(managed_identity_client_id=managed_identity_client_id)
    return AsyncServiceBusClient(_namespace(connection, namespace), credential, **options)
