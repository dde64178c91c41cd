"""Which Service Bus the settings name, and a client for it: one rule for the app (sync) and the
agent (asyncio).

``ServiceBusConnection`` holding ``=`` is a connection string: a local broker or the emulator.
Otherwise the namespace is ``ServiceBusConnection__fullyQualifiedNamespace``, or the connection
itself (a namespace written there), reached with DefaultAzureCredential as the managed identity
``AZURE_CLIENT_ID`` names: no shared keys in Azure.
"""

from collections.abc import Callable
from typing import Any, Protocol, Self

from azure.servicebus import ServiceBusClient
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient


class _Client(Protocol):
    """What both SDK clients, sync and asyncio, are built by."""

    def __init__(self, fully_qualified_namespace: str, credential: Any, **kwargs: Any) -> None: ...

    @classmethod
    def from_connection_string(cls, conn_str: str, **kwargs: Any) -> Self: ...


def _build[C: _Client](
    client: type[C],
    credential: Callable[[str | None], Any],
    connection: str | None,
    namespace: str | None,
    *,
    managed_identity_client_id: str | None,
    options: dict[str, Any],
) -> C:
    if connection and "=" in connection:
        return client.from_connection_string(connection, **options)
    namespace = namespace or connection
    if not namespace:
        raise ValueError(
            "Service Bus is not configured: set ServiceBusConnection__fullyQualifiedNamespace "
            "(Azure, managed identity) or ServiceBusConnection (a local broker's connection string)"
        )
    return client(namespace, credential(managed_identity_client_id), **options)


def _credential(managed_identity_client_id: str | None) -> Any:
    from azure.identity import DefaultAzureCredential  # noqa: PLC0415 - only against Azure

    return DefaultAzureCredential(managed_identity_client_id=managed_identity_client_id)


def _async_credential(managed_identity_client_id: str | None) -> Any:
    from azure.identity.aio import DefaultAzureCredential  # noqa: PLC0415 - only against Azure

    return DefaultAzureCredential(managed_identity_client_id=managed_identity_client_id)


def servicebus_client(
    connection: str | None = None,
    *,
    namespace: str | None = None,
    managed_identity_client_id: str | None = None,
    **options: Any,
) -> ServiceBusClient:
    """The app's client. ``options``: the client's keyword arguments, e.g. its retry settings."""
    return _build(
        ServiceBusClient,
        _credential,
        connection,
        namespace,
        managed_identity_client_id=managed_identity_client_id,
        options=options,
    )


def async_servicebus_client(
    connection: str | None = None,
    *,
    namespace: str | None = None,
    managed_identity_client_id: str | None = None,
    **options: Any,
) -> AsyncServiceBusClient:
    """The agent's client, by the same rule as ``servicebus_client``."""
    return _build(
        AsyncServiceBusClient,
        _async_credential,
        connection,
        namespace,
        managed_identity_client_id=managed_identity_client_id,
        options=options,
    )
