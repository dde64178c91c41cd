"""One rule decides whether Service Bus is the local bus, for the app, the agent and devhost."""

import pytest

from agent_worker.settings import AgentSettings
from harness.devhost.indexing import FunctionSpec
from harness.devhost.servicebus_triggers import _connection
from settings import LOCAL_SERVICEBUS, Settings, SettingsError, is_local_bus

NAMESPACE = "sas-prod.servicebus.windows.net"
BROKER = "Endpoint=sb://127.0.0.1:5672;UseDevelopmentEmulator=true"


def _spec() -> FunctionSpec:
    return FunctionSpec("f", "id", "serviceBusTrigger", {"connection": "ServiceBusConnection"}, ())


@pytest.mark.parametrize(
    ("connection", "namespace", "unset_is_local", "local"),
    [
        ("local", None, False, True),
        (None, None, True, True),
        (None, None, False, False),
        ("", None, True, True),
        (BROKER, None, True, False),
        (None, NAMESPACE, True, False),
        # A namespace is Service Bus itself, whatever the connection setting beside it says.
        ("local", NAMESPACE, True, False),
    ],
)
def test_the_rule(connection: str | None, namespace: str | None, unset_is_local: bool, local: bool) -> None:
    assert is_local_bus(connection, namespace, unset_is_local=unset_is_local) is local


def _env(connection: str | None, namespace: str | None) -> dict[str, str]:
    env: dict[str, str] = {}
    if connection is not None:
        env["ServiceBusConnection"] = connection
    if namespace is not None:
        env["ServiceBusConnection__fullyQualifiedNamespace"] = namespace
    return env


CASES = [("local", None), (BROKER, None), (None, NAMESPACE), ("local", NAMESPACE)]


@pytest.mark.parametrize(("connection", "namespace"), CASES)
def test_app_agent_and_devhost_agree(connection: str | None, namespace: str | None) -> None:
    env = _env(connection, namespace)
    app = Settings.from_env({**env, "SAS_PROFILE": "emulators"}).uses_local_bus
    agent = AgentSettings.from_env(env).uses_local_bus
    devhost = _connection(_spec(), env) == LOCAL_SERVICEBUS
    assert app == agent == devhost


def test_unset_is_local_only_where_nothing_else_can_be_meant() -> None:
    assert Settings.from_env({"SAS_PROFILE": "embedded"}).uses_local_bus
    assert not Settings.from_env({"SAS_PROFILE": "emulators"}).uses_local_bus
    assert AgentSettings.from_env({}).uses_local_bus
    with pytest.raises(SettingsError, match="'ServiceBusConnection' is not set"):
        _connection(_spec(), {})
