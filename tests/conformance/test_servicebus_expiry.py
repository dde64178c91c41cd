"""Message time-to-live, run against both stand-ins of Service Bus: the AMQP test broker through
the unchanged azure-servicebus SDK, and the embedded profile's local bus, each with its queue
read from a Config.json by its own loader (the broker's, and devhost's).

As Service Bus applies it (https://learn.microsoft.com/azure/service-bus-messaging/message-expiration):
a message expires at its enqueued time plus the smaller of its own TimeToLive and the queue's
DefaultMessageTimeToLive; an expired message is never received, and is dead-lettered with the
reason ``TTLExpiredException`` when the queue has DeadLetteringOnMessageExpiration, else dropped;
a locked message does not expire until its lock is given back. Each backend's clock is moved
(``Broker.advance``, a ``ManualClock``), so nothing here sleeps; the broker's clock also runs in
real time, hence margins of seconds either side on its side.
"""

from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiver, ServiceBusSubQueue

from adapters.clock import ManualClock
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import ReceivedMessage
from harness.devhost.config import queues_from_emulator_config
from tests.support.broker import BrokerFactory, write_config
from tests.support.broker_clients import receive_until

DEAD_LETTERING = {"MaxDeliveryCount": 10, "LockDuration": "PT1M", "DeadLetteringOnMessageExpiration": True}


class Rig(Protocol):
    """One queue ``q`` of a backend, as a receiver of it sees it."""

    def now(self) -> datetime: ...
    def send(self, message_id: str, *, ttl: timedelta | None = None, at: datetime | None = None) -> None: ...
    def advance(self, seconds: float) -> None: ...
    def receive(self, count: int) -> list[Any]: ...
    def receives_nothing(self) -> bool: ...
    def complete(self, message: Any) -> None: ...
    def abandon(self, message: Any) -> None: ...
    def dead_letters(self, count: int) -> list[tuple[str, str | None]]: ...


@dataclass
class LocalRig:
    bus: LocalServiceBus
    clock: ManualClock

    def now(self) -> datetime:
        return self.clock.now()

    def send(self, message_id: str, *, ttl: timedelta | None = None, at: datetime | None = None) -> None:
        self.bus.send("q", message_id, message_id=message_id, time_to_live=ttl, scheduled_enqueue_time=at)

    def advance(self, seconds: float) -> None:
        self.clock.advance(timedelta(seconds=seconds))

    def receive(self, count: int) -> list[ReceivedMessage]:
        return self.bus.receive("q", count)

    def receives_nothing(self) -> bool:
        return self.bus.receive("q", 10) == []

    def complete(self, message: ReceivedMessage) -> None:
        self.bus.complete(message)

    def abandon(self, message: ReceivedMessage) -> None:
        self.bus.abandon(message)

    def dead_letters(self, count: int) -> list[tuple[str, str | None]]:
        dead = self.bus.receive("q/$deadletterqueue", count + 1)
        for message in dead:
            self.bus.complete(message)
        return [(m.message_id, m.dead_letter_reason) for m in dead]


@dataclass
class BrokerRig:
    broker: Any
    client: ServiceBusClient
    receiver: ServiceBusReceiver
    held: list[Any] = field(default_factory=list)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.broker.clock.now(), UTC)

    def send(self, message_id: str, *, ttl: timedelta | None = None, at: datetime | None = None) -> None:
        message = ServiceBusMessage(message_id, message_id=message_id, time_to_live=ttl)
        with self.client.get_queue_sender("q") as sender:
            if at is None:
                sender.send_messages(message)
            else:
                sender.schedule_messages(message, at)

    def advance(self, seconds: float) -> None:
        self.broker.advance(seconds)

    def receive(self, count: int) -> list[Any]:
        return receive_until(self.receiver, count)

    def receives_nothing(self) -> bool:
        return self.receiver.receive_messages(max_message_count=10, max_wait_time=0.3) == []

    def complete(self, message: Any) -> None:
        self.receiver.complete_message(message)

    def abandon(self, message: Any) -> None:
        self.receiver.abandon_message(message)

    def dead_letters(self, count: int) -> list[tuple[str, str | None]]:
        with self.client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as receiver:
            dead = receive_until(receiver, count)
            dead += receiver.receive_messages(max_message_count=1, max_wait_time=0.3)  # no more
            for message in dead:
                receiver.complete_message(message)
        return [(str(m.message_id), m.dead_letter_reason) for m in dead]


class RigFactory(Protocol):
    def __call__(self, props: Mapping[str, Any]) -> Rig: ...


@pytest.fixture(params=["broker", "local bus"])
def rig_with(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RigFactory]:
    """Make a backend whose queue ``q`` has these Config.json Properties."""
    with ExitStack() as opened:

        def local(props: Mapping[str, Any]) -> Rig:
            clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
            queues = queues_from_emulator_config(write_config(tmp_path / "Config.json", {"q": props}))
            bus = opened.enter_context(LocalServiceBus(tmp_path / "bus.db", queues, clock=clock.now))
            return LocalRig(bus, clock)

        def remote(props: Mapping[str, Any]) -> Rig:
            factory: BrokerFactory = request.getfixturevalue("servicebus_broker_with")
            broker = factory({"q": props})
            client = opened.enter_context(ServiceBusClient.from_connection_string(broker.connection_string))
            # Opened now: a first receive would spend its short wait opening the link.
            receiver = opened.enter_context(client.get_queue_receiver("q"))
            return BrokerRig(broker, client, receiver)

        yield local if request.param == "local bus" else remote


def test_a_message_expires_after_the_smaller_of_its_ttl_and_the_queue_default(rig_with: RigFactory) -> None:
    rig = rig_with({**DEAD_LETTERING, "DefaultMessageTimeToLive": "PT1M"})
    rig.send("own", ttl=timedelta(seconds=20))
    rig.send("capped", ttl=timedelta(hours=1))
    rig.send("default")
    rig.advance(25)  # past the message's own 20 s, within the queue's minute
    assert rig.dead_letters(1) == [("own", "TTLExpiredException")]
    rig.advance(40)  # 65 s: the queue's minute caps the hour and is the default's
    assert rig.receives_nothing()
    expired = [("capped", "TTLExpiredException"), ("default", "TTLExpiredException")]
    assert sorted(rig.dead_letters(2)) == expired


def test_a_message_within_its_ttl_is_delivered(rig_with: RigFactory) -> None:
    rig = rig_with({**DEAD_LETTERING, "DefaultMessageTimeToLive": "PT1M"})
    rig.send("fresh", ttl=timedelta(seconds=20))
    rig.advance(15)
    [message] = rig.receive(1)
    rig.complete(message)
    assert rig.dead_letters(0) == []


def test_a_400_day_old_message_is_not_delivered(rig_with: RigFactory) -> None:
    rig = rig_with({**DEAD_LETTERING, "DefaultMessageTimeToLive": "P14D"})
    rig.send("stale")
    rig.advance(timedelta(days=400).total_seconds())
    assert rig.receives_nothing()
    assert rig.dead_letters(1) == [("stale", "TTLExpiredException")]


def test_an_expired_message_is_dropped_without_dead_lettering_on_expiration(rig_with: RigFactory) -> None:
    rig = rig_with({"MaxDeliveryCount": 10, "LockDuration": "PT1M", "DefaultMessageTimeToLive": "PT5S"})
    rig.send("stale")
    rig.advance(5.5)
    assert rig.receives_nothing()
    assert rig.dead_letters(0) == []


def test_a_locked_message_expires_only_once_its_lock_is_given_back(rig_with: RigFactory) -> None:
    rig = rig_with(DEAD_LETTERING)
    rig.send("kept", ttl=timedelta(seconds=5))
    rig.send("abandoned", ttl=timedelta(seconds=5))
    kept, abandoned = rig.receive(2)
    rig.advance(10)  # both past their TTL, both still locked (1 min)
    rig.complete(kept)  # the holder may still finish an expired message
    rig.abandon(abandoned)  # ... and once it is given back, it expires
    assert rig.receives_nothing()
    assert rig.dead_letters(1) == [("abandoned", "TTLExpiredException")]


def test_a_scheduled_message_lives_from_its_enqueue_time(rig_with: RigFactory) -> None:
    rig = rig_with(DEAD_LETTERING)
    rig.send("later", ttl=timedelta(seconds=5), at=rig.now() + timedelta(seconds=30))
    rig.advance(31)  # enqueued now, not expired though sent 31 s ago with a 5 s TTL
    [message] = rig.receive(1)
    rig.abandon(message)
    rig.advance(5.5)
    assert rig.receives_nothing()
    assert rig.dead_letters(1) == [("later", "TTLExpiredException")]
