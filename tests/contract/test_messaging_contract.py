"""One contract for messaging, two implementations: the local Service Bus (embedded profile)
and Service Bus through azure-servicebus, here against the AMQP test broker.

Each side is what the app really uses: the app's ``MessageSender``/``MessageSettlement`` adapter,
and devhost's trigger source (``LocalServiceBus`` / ``BrokerServiceBus``) standing where the
Functions host's Service Bus extension stands.
"""

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from adapters.servicebus.azure import ServiceBusMessaging
from adapters.servicebus.clients import servicebus_client
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.local_messaging import LocalMessaging
from adapters.servicebus.messages import MessageLockLost, QueueConfig
from harness.devhost.servicebus_broker import BrokerServiceBus
from harness.devhost.servicebus_triggers import TriggerBus

MAX_DELIVERIES = 3
QUEUES = [f"work-{n}" for n in range(20)]  # one per test: a test never sees another's messages


@dataclass
class Rig:
    messaging: LocalMessaging | ServiceBusMessaging
    bus: TriggerBus
    queue: str

    def receive_all(self, expected: int) -> list[Any]:
        """Receive until ``expected`` messages came (the broker delivers asynchronously)."""
        got: list[Any] = []
        for _ in range(50):
            got += self.bus.receive(self.queue, expected - len(got))
            if len(got) >= expected:
                break
        return got

    @property
    def dead_letters(self) -> str:
        return f"{self.queue}/$deadletterqueue"


def _queue_config(name: str) -> QueueConfig:
    return QueueConfig(name, max_delivery_count=MAX_DELIVERIES, lock_duration=timedelta(seconds=30))


def _emulator_config(path: Path) -> Path:
    queues = [
        {
            "Name": name,
            "Properties": {
                "MaxDeliveryCount": MAX_DELIVERIES,
                "LockDuration": "PT30S",
                "RequiresDuplicateDetection": True,
                "DuplicateDetectionHistoryTimeWindow": "PT10M",
            },
        }
        for name in QUEUES
    ]
    path.write_text(json.dumps({"UserConfig": {"Namespaces": [{"Name": "test", "Queues": queues}]}}))
    return path


@pytest.fixture(scope="module")
def broker_rigs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Iterator[Rig]]:
    """One broker and one pair of clients for the module (closing SDK clients takes ~0.5 s)."""
    from harness.standins.amqp_broker.server import start_broker  # noqa: PLC0415 - needs qpid-proton

    with start_broker(_emulator_config(tmp_path_factory.mktemp("broker") / "Config.json")) as broker:
        sb = ServiceBusMessaging(servicebus_client(broker.connection_string))
        queues = [_queue_config(q) for q in QUEUES]
        bus = BrokerServiceBus(servicebus_client(broker.connection_string), queues)
        yield (Rig(sb, bus, queue) for queue in QUEUES)
        bus.close()
        sb.close()


@pytest.fixture(params=["local", "broker"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    if request.param == "broker":
        yield next(request.getfixturevalue("broker_rigs"))
        return
    local = LocalServiceBus(tmp_path / "bus.db")
    local.declare(_queue_config(QUEUES[0]))
    messaging = LocalMessaging(tmp_path / "bus.db", lambda: datetime.now(UTC))
    yield Rig(messaging, local, QUEUES[0])
    messaging.close()
    local.close()


def test_a_sent_message_arrives_with_its_id_correlation_and_properties(rig: Rig) -> None:
    rig.messaging.send(
        rig.queue, '{"n": 1}', message_id="m-1", correlation_id="order-1", properties={"k": "v"}
    )
    [message] = rig.receive_all(1)
    assert (message.message_id, message.body, message.correlation_id) == ("m-1", b'{"n": 1}', "order-1")
    assert message.content_type == "application/json"
    assert message.application_properties == {"k": "v"}
    assert message.delivery_count == 1  # as Functions reports it: this delivery included
    rig.bus.complete(message)
    assert rig.bus.receive(rig.queue, 1) == []


def test_a_message_id_sent_twice_in_the_window_is_delivered_once(rig: Rig) -> None:
    for _ in range(3):
        rig.messaging.send(rig.queue, "{}", message_id="same")
    rig.messaging.send(rig.queue, "{}", message_id="other")
    got = rig.receive_all(2)
    assert sorted(m.message_id for m in got) == ["other", "same"]
    assert rig.bus.receive(rig.queue, 3) == []


def test_an_abandoned_message_comes_back_with_one_more_delivery(rig: Rig) -> None:
    rig.messaging.send(rig.queue, "{}", message_id="m-1")
    [first] = rig.receive_all(1)
    rig.bus.abandon(first)
    [again] = rig.receive_all(1)
    assert again.message_id == "m-1"
    assert again.delivery_count == first.delivery_count + 1


def test_after_max_deliveries_the_broker_dead_letters_the_message(rig: Rig) -> None:
    rig.messaging.send(rig.queue, "{}", message_id="poison")
    for _ in range(MAX_DELIVERIES):
        [message] = rig.receive_all(1)
        rig.bus.abandon(message)
    assert rig.bus.receive(rig.queue, 1) == []
    [dead] = rig.messaging.peek(rig.dead_letters, 10)
    assert (dead.message_id, dead.dead_letter_reason) == ("poison", "MaxDeliveryCountExceeded")


def test_the_app_dead_letters_the_message_its_trigger_holds_with_a_reason(rig: Rig) -> None:
    rig.messaging.send(rig.queue, "not json", message_id="bad")
    [message] = rig.receive_all(1)
    rig.messaging.dead_letter(rig.queue, message.lock_token, "InvalidJson", "line 1: not json")
    # What the host does when the function returns: the message is settled already.
    with contextlib.suppress(MessageLockLost):
        rig.bus.complete(message)
    assert rig.bus.receive(rig.queue, 1) == []
    [dead] = rig.messaging.peek(rig.dead_letters, 10)
    assert (dead.message_id, dead.body) == ("bad", b"not json")
    assert dead.dead_letter_reason == "InvalidJson"
    assert dead.dead_letter_error_description == "line 1: not json"


def test_renewing_a_lock_moves_locked_until_forward(rig: Rig) -> None:
    rig.messaging.send(rig.queue, "{}", message_id="m-1")
    [message] = rig.receive_all(1)
    renewed = rig.bus.renew_lock(message)
    assert renewed >= message.locked_until
    rig.bus.complete(message)


def test_peek_reads_without_taking(rig: Rig) -> None:
    for n in range(5):
        rig.messaging.send(rig.queue, json.dumps({"n": n}), message_id=f"m-{n}")
    peeked = rig.messaging.peek(rig.queue, 10)
    assert [json.loads(m.body)["n"] for m in peeked] == [0, 1, 2, 3, 4]
    assert len(rig.receive_all(5)) == 5


def test_a_dead_letter_is_resubmitted_to_its_queue_under_a_new_id(rig: Rig) -> None:
    rig.messaging.send(rig.queue, '{"fixed": true}', message_id="m-1", correlation_id="order-1")
    [message] = rig.receive_all(1)
    rig.messaging.dead_letter(rig.queue, message.lock_token, "Bug", "fixed since")
    with pytest.raises(MessageLockLost):
        rig.bus.renew_lock(message)
    assert rig.messaging.resubmit_dead_letter(rig.queue, "m-1")
    assert not rig.messaging.resubmit_dead_letter(rig.queue, "m-1")
    [back] = rig.receive_all(1)
    assert back.message_id.startswith("m-1:resubmitted:")
    assert (back.body, back.correlation_id) == (b'{"fixed": true}', "order-1")
    assert rig.messaging.peek(rig.dead_letters, 10) == []


def test_a_dead_letter_that_is_not_utf8_is_resubmitted_byte_for_byte(rig: Rig) -> None:
    """What `ops dlq resubmit` does with an InvalidEncoding dead letter: moves it, not fails on it."""
    rig.messaging.send(rig.queue, b"\xff\xfe{not utf-8}", message_id="m-1")
    [message] = rig.receive_all(1)
    rig.messaging.dead_letter(rig.queue, message.lock_token, "InvalidEncoding", "the body is not UTF-8 JSON")
    assert rig.messaging.resubmit_dead_letter(rig.queue, "m-1")
    [back] = rig.receive_all(1)
    assert back.body == b"\xff\xfe{not utf-8}"


def test_competing_receivers_get_each_message_once(rig: Rig) -> None:
    total = 60
    for n in range(total):
        rig.messaging.send(rig.queue, "{}", message_id=f"m-{n}")
    seen: list[str] = []
    guard = threading.Lock()

    def drain() -> None:
        idle = 0
        while idle < 5:
            batch = rig.bus.receive(rig.queue, 4)
            idle = 0 if batch else idle + 1
            for message in batch:
                rig.bus.complete(message)
                with guard:
                    seen.append(message.message_id)

    workers = [threading.Thread(target=drain) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert sorted(seen) == sorted(f"m-{n}" for n in range(total))


def test_a_value_body_from_another_amqp_client_reads_as_its_bytes(broker_rigs: Iterator[Rig]) -> None:
    """Service Bus only (devhost's bus has byte bodies only): a JMS TextMessage, say, arrives as an
    AMQP value body; the trigger and the operator tools still read its text."""
    from azure.servicebus.amqp import AmqpAnnotatedMessage  # noqa: PLC0415

    rig = next(broker_rigs)
    assert isinstance(rig.messaging, ServiceBusMessaging)
    with rig.messaging.client.get_queue_sender(rig.queue) as sender:
        sender.send_messages(AmqpAnnotatedMessage(value_body='{"n": 1}', properties={"message_id": "v-1"}))
    assert [m.body for m in rig.messaging.peek(rig.queue, 10)] == [b'{"n": 1}']
    [message] = rig.receive_all(1)
    assert (message.message_id, message.body) == ("v-1", b'{"n": 1}')
    rig.bus.complete(message)


def test_resubmitting_a_dead_letter_leaves_the_ones_behind_it_untouched(rig: Rig) -> None:
    """Found by a peek and moved alone: the dead letters after it keep their delivery counts
    (on Service Bus, the ones ahead of it are locked on the way; see resubmit_dead_letter)."""
    for n in range(4):
        rig.messaging.send(rig.queue, json.dumps({"n": n}), message_id=f"m-{n}")
    for message in rig.receive_all(4):
        rig.messaging.dead_letter(rig.queue, message.lock_token, "Bug", "fixed since")
    dead_letters = f"{rig.queue}/$deadletterqueue"
    before = {m.message_id: m.delivery_count for m in rig.messaging.peek(dead_letters, 10)}
    assert rig.messaging.resubmit_dead_letter(rig.queue, "m-0")
    assert not rig.messaging.resubmit_dead_letter(rig.queue, "absent")
    after = {m.message_id: m.delivery_count for m in rig.messaging.peek(dead_letters, 10)}
    assert after == {k: v for k, v in before.items() if k != "m-0"}


def test_remove_completes_the_named_messages_and_keeps_the_rest(rig: Rig) -> None:
    """ops alerts ack / drain: the named ones leave the queue; the others stay, with their
    delivery counts unchanged behind the last one removed."""
    for n in range(4):
        rig.messaging.send(rig.queue, json.dumps({"n": n}), message_id=f"m-{n}")
    before = {m.message_id: m.delivery_count for m in rig.messaging.peek(rig.queue, 10)}
    assert rig.messaging.remove(rig.queue, {"m-0", "m-2", "absent"}) == ["m-0", "m-2"]
    left = rig.messaging.peek(rig.queue, 10)
    assert [m.message_id for m in left] == ["m-1", "m-3"]
    assert left[-1].delivery_count == before["m-3"]
    assert rig.messaging.remove(rig.queue, None) == ["m-1", "m-3"]
    assert rig.messaging.peek(rig.queue, 10) == []
