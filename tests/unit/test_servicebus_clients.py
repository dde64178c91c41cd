"""The app and the agent read the Service Bus settings by one rule (``adapters.servicebus.clients``):
for each way the settings can be written, both clients point at the same namespace, and nothing
configured is an error naming the settings. Building a client opens no connection."""

import asyncio

import pytest

from adapters.servicebus.clients import async_servicebus_client, servicebus_client

# The local test broker's form (harness/standins/amqp_broker): a key the broker never checks.
LOCAL_BROKER = (
    "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=RootManageSharedAccessKey;"
    "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
)
NAMESPACE = "sb-sas.servicebus.windows.net"


@pytest.mark.parametrize(
    ("connection", "namespace", "reached"),
    [
        (LOCAL_BROKER, None, "127.0.0.1:5672"),
        (LOCAL_BROKER, NAMESPACE, "127.0.0.1:5672"),  # a connection string wins
        (None, NAMESPACE, NAMESPACE),  # Azure: the namespace, with the managed identity
        ("local", NAMESPACE, NAMESPACE),  # "local" is no connection string
        (NAMESPACE, None, NAMESPACE),  # a namespace written in ServiceBusConnection itself
    ],
)
def test_the_app_and_the_agent_reach_the_same_namespace(
    connection: str | None, namespace: str | None, reached: str
) -> None:
    app = servicebus_client(connection, namespace=namespace, managed_identity_client_id="mi-client-id")

    async def agent_namespace() -> str:
        client = async_servicebus_client(
            connection, namespace=namespace, managed_identity_client_id="mi-client-id"
        )
        async with client:
            return client.fully_qualified_namespace

    with app:
        assert app.fully_qualified_namespace == reached
    assert asyncio.run(agent_namespace()) == reached


@pytest.mark.parametrize("build", [servicebus_client, async_servicebus_client])
def test_nothing_configured_names_the_settings(build: object) -> None:
    assert callable(build)
    with pytest.raises(ValueError, match="ServiceBusConnection__fullyQualifiedNamespace"):
        build(None, namespace=None)
