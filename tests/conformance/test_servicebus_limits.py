"""The Service Bus limits table (adapters/servicebus/limits.py), run against both stand-ins: the
AMQP test broker through the unchanged azure-servicebus SDK, and the embedded profile's local bus.
One row is one test, parametrised by backend; each refusal is the error the SDK raises for it.
"""

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessageSizeExceededError

from adapters.servicebus import limits
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import QueueConfig
from devhost.config import queues_from_emulator_config
from standins.amqp_broker.config import load_queues
from tests.support.broker import BrokerFactory, write_config
from tests.support.broker_clients import PLAIN

KIB = 1024


class Send(Protocol):
    def __call__(
        self, body: bytes, *, message_id: str = "m-1", properties: Mapping[str, Any] | None = None
    ) -> None: ...


@pytest.fixture(params=["broker", "local bus"])
def send(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Send]:
    """Send one message to the queue ``q`` of the backend, as the app's adapter sends it."""
    if request.param == "local bus":
        with LocalServiceBus(tmp_path / "bus.db", [QueueConfig("q")]) as bus:

            def local(
                body: bytes, *, message_id: str = "m-1", properties: Mapping[str, Any] | None = None
            ) -> None:
                bus.send("q", body, message_id=message_id, application_properties=properties)

            yield local
        return
    factory: BrokerFactory = request.getfixturevalue("servicebus_broker_with")
    broker = factory({"q": PLAIN})
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("q") as sender,
    ):

        def remote(
            body: bytes, *, message_id: str = "m-1", properties: Mapping[str, Any] | None = None
        ) -> None:
            sender.send_messages(
                ServiceBusMessage(body, message_id=message_id, application_properties=dict(properties or {}))
            )

        yield remote


def test_a_message_over_the_standard_tier_size_is_refused(send: Send) -> None:
    send(b"x" * (100 * KIB))  # well under: accepted
    with pytest.raises(MessageSizeExceededError):
        send(b"x" * (KIB * KIB))


def test_an_application_property_over_the_header_size_is_refused(send: Send) -> None:
    with pytest.raises(MessageSizeExceededError):
        send(b"x", properties={"big": "p" * (70 * KIB)})


def test_a_message_id_over_128_characters_is_refused(send: Send) -> None:
    send(b"x", message_id="i" * limits.most(limits.ID_LENGTH))
    with pytest.raises(ValueError, match="message_id cannot be longer than 128 characters"):
        send(b"x", message_id="i" * 300)


# --- queue definitions: each backend's own Config.json loader -------------------------------------


def _broker_loads(props: Mapping[str, Any], tmp_path: Path) -> None:
    load_queues(write_config(tmp_path / "Config.json", {"q": props}))


def _local_loads(props: Mapping[str, Any], tmp_path: Path) -> None:
    """devhost's loader, which declares the local bus's queues at start-up."""
    queues_from_emulator_config(write_config(tmp_path / "Config.json", {"q": props}))


@pytest.mark.parametrize("load", [_broker_loads, _local_loads], ids=["broker", "local bus"])
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LockDuration", "PT2H"),
        ("DuplicateDetectionHistoryTimeWindow", "PT0.000001S"),
        ("DuplicateDetectionHistoryTimeWindow", "P30D"),
        ("DefaultMessageTimeToLive", "PT0S"),
        ("DefaultMessageTimeToLive", "PT0.5S"),
        ("MaxDeliveryCount", 0),
        ("MaxDeliveryCount", 2**31),
        ("MaxDeliveryCount", "ten"),
    ],
)
def test_a_queue_property_outside_its_bounds_is_refused_in_one_line(
    load: Callable[[Mapping[str, Any], Path], None], name: str, value: Any, tmp_path: Path
) -> None:
    props: dict[str, Any] = {"MaxDeliveryCount": 10, "LockDuration": "PT1M", name: value}
    if name.startswith("Duplicate"):
        props["RequiresDuplicateDetection"] = True
    with pytest.raises(ValueError, match=name) as refused:
        load(props, tmp_path)
    assert "\n" not in str(refused.value)
    assert "'q'" in str(refused.value)  # names the queue


@pytest.mark.parametrize("load", [_broker_loads, _local_loads], ids=["broker", "local bus"])
def test_the_bounds_themselves_are_accepted(
    load: Callable[[Mapping[str, Any], Path], None], tmp_path: Path
) -> None:
    load(
        {
            "MaxDeliveryCount": 1,
            "LockDuration": "PT5M",
            "RequiresDuplicateDetection": True,
            "DuplicateDetectionHistoryTimeWindow": "P7D",
            "DefaultMessageTimeToLive": "PT1S",
        },
        tmp_path,
    )
