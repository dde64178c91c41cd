"""The Service Bus limits table (adapters/servicebus/limits.py), run against both stand-ins: the
AMQP test broker through the unchanged azure-servicebus SDK, and the embedded profile's local bus.
One row is one test, parametrised by backend; each refusal is the error the SDK raises for it.
"""

from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessageSizeExceededError

from adapters.servicebus import limits
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import QueueConfig
from standins.amqp_broker.config import queues_from_config
from tests.support.broker import BrokerFactory
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


# --- queue definitions: the broker's Config.json loader, the local bus's declare ----------------


def _broker_declares(props: Mapping[str, Any]) -> None:
    queues_from_config(
        {"UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": "q", "Properties": dict(props)}]}]}}
    )


def _local_declares(tmp_path: Path) -> Callable[[Mapping[str, Any]], None]:
    def declare(props: Mapping[str, Any]) -> None:
        window = props.get("DuplicateDetectionHistoryTimeWindow")
        with LocalServiceBus(tmp_path / "bus.db") as bus:
            bus.declare(
                QueueConfig(
                    "q",
                    max_delivery_count=int(props.get("MaxDeliveryCount", 10)),
                    lock_duration=props.get("LockDuration", timedelta(minutes=1)),
                    duplicate_detection_window=window,
                )
            )

    return declare


ISO = {timedelta(hours=2): "PT2H", timedelta(microseconds=1): "PT0.000001S", timedelta(days=30): "P30D"}


@pytest.mark.parametrize("backend", ["broker", "local bus"])
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LockDuration", timedelta(hours=2)),
        ("DuplicateDetectionHistoryTimeWindow", timedelta(microseconds=1)),
        ("DuplicateDetectionHistoryTimeWindow", timedelta(days=30)),
    ],
)
def test_a_queue_property_outside_its_bounds_is_refused(
    backend: str, name: str, value: timedelta, tmp_path: Path
) -> None:
    if backend == "broker":
        props: dict[str, Any] = {name: ISO[value]}
        if name.startswith("Duplicate"):
            props["RequiresDuplicateDetection"] = True
        with pytest.raises(ValueError, match=name):
            _broker_declares(props)
        return
    with pytest.raises(ValueError, match=name):
        _local_declares(tmp_path)({name: value})
