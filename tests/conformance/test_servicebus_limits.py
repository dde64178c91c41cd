"""The Service Bus limits table (adapters/servicebus/limits.py), run against both stand-ins: the
AMQP test broker through the unchanged azure-servicebus SDK, and the embedded profile's local bus.
One row is one test, parametrised by backend; each refusal is the error the SDK raises for it.
"""

from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusMessageState, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusError

from adapters.servicebus import limits
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import QueueConfig, dead_letter_queue
from harness.devhost.config import queues_from_emulator_config
from harness.standins.amqp_broker.config import load_queues
from tests.support.broker import BrokerFactory, write_config
from tests.support.broker_clients import PLAIN, receive_until

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
        ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client,
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


def test_one_application_property_over_32_kb_is_refused(send: Send) -> None:
    """Under the 64 KB header, over the 32 KB a property may take: the service's unspecific
    rejection, which azure-servicebus raises as ServiceBusError (``limits.PROPERTY_SIZE``)."""
    send(b"x", properties={"fits": "p" * (30 * KIB)})
    with pytest.raises(ServiceBusError) as refused:
        send(b"x", properties={"big": "p" * (40 * KIB)})
    assert not isinstance(refused.value, MessageSizeExceededError)


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


# --- settling and scheduling: the same operations on each backend ---------------------------------


class Backend(Protocol):
    def dead_letter_one(self, reason: str, description: str) -> tuple[str | None, str | None]:
        """Send one message, receive it, dead-letter it; the reason and description read back."""
        ...

    def schedule(self, at: datetime) -> None: ...

    def send_ids(self, correlation_id: str, subject: str) -> tuple[str | None, str | None]:
        """Send one message with these IDs; the IDs as a receiver reads them."""
        ...

    def scheduled_and_receivable(self) -> tuple[int, int]:
        """Scheduled messages (peeked) and messages a receiver gets now."""
        ...


class LocalBackend:
    def __init__(self, bus: LocalServiceBus) -> None:
        self.bus = bus

    def dead_letter_one(self, reason: str, description: str) -> tuple[str | None, str | None]:
        self.bus.send("q", b"x")
        [message] = self.bus.receive("q")
        self.bus.dead_letter(message, reason, description)
        [dead] = self.bus.peek(dead_letter_queue("q"))
        return dead.dead_letter_reason, dead.dead_letter_error_description

    def schedule(self, at: datetime) -> None:
        self.bus.send("q", b"later", scheduled_enqueue_time=at)

    def send_ids(self, correlation_id: str, subject: str) -> tuple[str | None, str | None]:
        self.bus.send("q", b"x", correlation_id=correlation_id, subject=subject)
        [message] = self.bus.receive("q")
        return message.correlation_id, message.subject

    def scheduled_and_receivable(self) -> tuple[int, int]:
        return self.bus.counts("q")["scheduled"], len(self.bus.receive("q", 10))


class BrokerBackend:
    def __init__(self, client: ServiceBusClient) -> None:
        self.client = client

    def dead_letter_one(self, reason: str, description: str) -> tuple[str | None, str | None]:
        with self.client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage(b"x"))
        with self.client.get_queue_receiver("q") as receiver:
            [message] = receive_until(receiver, 1)
            receiver.dead_letter_message(message, reason=reason, error_description=description)
        with self.client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            [dead] = dlq.peek_messages(max_message_count=1)
        return dead.dead_letter_reason, dead.dead_letter_error_description

    def schedule(self, at: datetime) -> None:
        with self.client.get_queue_sender("q") as sender:
            sender.schedule_messages(ServiceBusMessage(b"later"), at)

    def send_ids(self, correlation_id: str, subject: str) -> tuple[str | None, str | None]:
        with self.client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage(b"x", correlation_id=correlation_id, subject=subject))
        with self.client.get_queue_receiver("q") as receiver:
            [message] = receive_until(receiver, 1)
        return message.correlation_id, message.subject

    def scheduled_and_receivable(self) -> tuple[int, int]:
        with self.client.get_queue_receiver("q") as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            # Nothing due: a receive that finds nothing waits its max_wait_time; one second is the
            # least the SDK takes, and the assertion is on what arrives, not on when.
            received = receiver.receive_messages(max_message_count=10, max_wait_time=1)
        return sum(m.state == ServiceBusMessageState.SCHEDULED for m in peeked), len(received)


@pytest.fixture(params=["broker", "local bus"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "local bus":
        with LocalServiceBus(tmp_path / "bus.db", [QueueConfig("q")]) as bus:
            yield LocalBackend(bus)
        return
    factory: BrokerFactory = request.getfixturevalue("servicebus_broker_with")
    broker = factory({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client:
        yield BrokerBackend(client)


def test_a_dead_letter_reason_and_description_of_4096_characters_are_kept_whole(backend: Backend) -> None:
    most = limits.most(limits.DEAD_LETTER_TEXT_LENGTH)
    reason, description = "r" * most, "d" * most
    assert backend.dead_letter_one(reason, description) == (reason, description)


def test_a_message_scheduled_for_the_year_9999_is_accepted_and_stays_scheduled(backend: Backend) -> None:
    """No scheduling bound (``limits.SCHEDULED_ENQUEUE_TIME``): the last day a datetime holds."""
    backend.schedule(datetime(9999, 12, 31, tzinfo=UTC))
    assert backend.scheduled_and_receivable() == (1, 0)


@pytest.mark.parametrize("field", ["reason", "error_description"])
def test_the_local_bus_refuses_a_dead_letter_text_over_4096_characters_and_keeps_the_lock(
    field: str, tmp_path: Path
) -> None:
    """Local bus only: it plays the SDK's part in the embedded profile and refuses as Microsoft's
    SDKs do; the broker plays only the service's, whose answer is undocumented (the row's note)."""
    too_long = "t" * (limits.most(limits.DEAD_LETTER_TEXT_LENGTH) + 1)
    texts = {"reason": "Bad", "error_description": "bad", field: too_long}
    with LocalServiceBus(tmp_path / "bus.db", [QueueConfig("q")]) as bus:
        bus.send("q", b"x")
        [message] = bus.receive("q")
        with pytest.raises(ValueError, match=f"{field} cannot be longer than 4096 characters"):
            bus.dead_letter(message, texts["reason"], texts["error_description"])
        with pytest.raises(ValueError, match=f"{field} cannot be longer than 4096 characters"):
            bus.dead_letter_by_lock_token(
                "q", message.lock_token, texts["reason"], texts["error_description"]
            )
        assert bus.counts("q") == {"active": 0, "scheduled": 0, "locked": 1, "dead_letter": 0}
        bus.dead_letter(message, "Bad", "bad")  # the lock is still the receiver's
        assert bus.counts("q")["dead_letter"] == 1


def test_a_max_delivery_count_of_100000_is_accepted_as_azure_accepts_it(tmp_path: Path) -> None:
    """No documented maximum but the Int32 (``limits.MAX_DELIVERY_COUNT``); the emulator's 1..10
    is the emulator's."""
    for load in (_broker_loads, _local_loads):
        load({"MaxDeliveryCount": 100_000, "LockDuration": "PT1M"}, tmp_path)


def test_a_correlation_id_and_subject_of_300_characters_are_carried(backend: Backend) -> None:
    """No length is documented for them (``limits.ID_LENGTH``'s note): only the header bounds them."""
    assert backend.send_ids("c" * 300, "s" * 300) == ("c" * 300, "s" * 300)


def test_the_local_bus_refuses_an_empty_message_id(tmp_path: Path) -> None:
    """Local bus only, as Microsoft.Azure.ServiceBus refuses it client-side (``limits.ID_LENGTH``'s
    floor); the broker takes what azure-servicebus sends, the service's answer being undocumented."""
    with LocalServiceBus(tmp_path / "bus.db", [QueueConfig("q")]) as bus:
        with pytest.raises(ValueError, match="message_id cannot be empty"):
            bus.send("q", b"x", message_id="")
        assert bus.counts("q")["active"] == 0
