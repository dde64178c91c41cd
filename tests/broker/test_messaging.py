"""Sending, receiving and browsing through the test broker with the unchanged SDK."""

import asyncio
import threading
import uuid
from datetime import timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.exceptions import MessagingEntityNotFoundError

from tests.support.broker import BrokerFactory, BrokerProcess
from tests.support.broker_clients import PLAIN, receive_until


@pytest.mark.processes  # the servicebus_broker process
def test_send_receive_complete(servicebus_broker: BrokerProcess) -> None:
    message_id = f"order-{uuid.uuid4()}"
    with ServiceBusClient.from_connection_string(servicebus_broker.connection_string) as client:
        with client.get_queue_sender("orders") as sender:
            sender.send_messages(ServiceBusMessage(b'{"OrderID": "o-1"}', message_id=message_id))
        with client.get_queue_receiver("orders") as receiver:
            [received] = receive_until(receiver, 1)
            assert received.message_id == message_id
            assert b"".join(received.body) == b'{"OrderID": "o-1"}'
            assert received.delivery_count == 0  # Service Bus counts earlier deliveries only
            assert received.lock_token is not None
            assert received.locked_until_utc is not None
            assert received.sequence_number is not None and received.sequence_number >= 1
            assert received.enqueued_time_utc is not None
            receiver.complete_message(received)
            assert receiver.receive_messages(max_wait_time=0.3) == []


def test_properties_round_trip(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    sent = ServiceBusMessage(
        "payload",
        message_id="m-1",
        correlation_id="c-1",
        subject="AgentReply",
        content_type="application/json",
        reply_to="agent-replies",
        to="someone",
        time_to_live=timedelta(seconds=30),
        application_properties={"step": "charge", "attempt": 3, "final": True, "ratio": 0.5},
    )
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(sent)
        with client.get_queue_receiver("q") as receiver:
            [received] = receive_until(receiver, 1)
            receiver.complete_message(received)
    assert str(received) == "payload"
    assert received.message_id == "m-1"
    assert received.correlation_id == "c-1"
    assert received.subject == "AgentReply"
    assert received.content_type == "application/json"
    assert received.reply_to == "agent-replies"
    assert received.to == "someone"
    assert received.time_to_live == timedelta(seconds=30)
    assert received.application_properties == {
        b"step": b"charge",
        b"attempt": 3,
        b"final": True,
        b"ratio": 0.5,
    }


def test_batch_send_arrives_as_separate_messages_in_order(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            batch = sender.create_message_batch()
            for i in range(10):
                batch.add_message(ServiceBusMessage(f"body-{i}", message_id=f"m-{i}"))
            sender.send_messages(batch)
            sender.send_messages([ServiceBusMessage("list-0"), ServiceBusMessage("list-1")])
        assert broker.queue_depth("q") == 12
        with client.get_queue_receiver("q") as receiver:
            received = receive_until(receiver, 12)
            for message in received:
                receiver.complete_message(message)
    assert [str(m) for m in received] == [f"body-{i}" for i in range(10)] + ["list-0", "list-1"]
    assert [m.message_id for m in received[:10]] == [f"m-{i}" for i in range(10)]
    numbers = [m.sequence_number or 0 for m in received]
    assert numbers == sorted(numbers) and len(set(numbers)) == 12 and 0 not in numbers
    assert broker.queue_depth("q") == 0


def test_a_batch_of_messages_with_time_to_live_is_still_unpacked(
    servicebus_broker_with: BrokerFactory,
) -> None:
    """A TTL gives the first message creation and expiry times that the batch's envelope does not
    repeat (it carries the first message-id only); the batch is still a batch."""
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(
                [
                    ServiceBusMessage(f"b-{i}", message_id=f"b-{i}", time_to_live=timedelta(minutes=5))
                    for i in range(3)
                ]
            )
        assert broker.queue_depth("q") == 3
        with client.get_queue_receiver("q") as receiver:
            received = receive_until(receiver, 3)
            for message in received:
                receiver.complete_message(message)
    assert [(m.message_id, m.time_to_live) for m in received] == [
        (f"b-{i}", timedelta(minutes=5)) for i in range(3)
    ]


def test_receive_and_delete_removes_on_delivery(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        with client.get_queue_receiver(
            "q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE
        ) as receiver:
            received = receive_until(receiver, 2)
            assert [str(m) for m in received] == ["a", "b"]
            assert all(m.lock_token is None for m in received)
            assert broker.queue_depth("q") == 0


def test_peek_does_not_lock(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"m{i}") for i in range(3)])
        with client.get_queue_receiver("q") as receiver:
            peeked = receiver.peek_messages(max_message_count=10)
            assert [m.message_id for m in peeked] == ["m0", "m1", "m2"]
            assert all(m.lock_token is None and m.locked_until_utc is None for m in peeked)
            received = receive_until(receiver, 3)
            assert [m.message_id for m in received] == ["m0", "m1", "m2"]
            # Locked messages are still there to browse, from a given sequence number on.
            second = peeked[1].sequence_number
            assert second is not None
            again = receiver.peek_messages(max_message_count=10, sequence_number=second)
            assert [m.message_id for m in again] == ["m1", "m2"]
            for message in received:
                receiver.complete_message(message)
            assert receiver.peek_messages(max_message_count=10, sequence_number=1) == []


def test_competing_receivers_each_get_distinct_messages(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    total = 200
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("q") as sender,
    ):
        for start in range(0, total, 50):
            sender.send_messages(
                [ServiceBusMessage(f"{i}", message_id=f"{i}") for i in range(start, start + 50)]
            )
    got: dict[str, list[str]] = {"a": [], "b": []}
    finished = threading.Event()

    def consume(name: str) -> None:
        with (
            ServiceBusClient.from_connection_string(broker.connection_string) as own_client,
            own_client.get_queue_receiver("q") as receiver,
        ):
            while not finished.is_set():
                for message in receiver.receive_messages(max_message_count=10, max_wait_time=0.5):
                    receiver.complete_message(message)
                    got[name].append(str(message.message_id))
                if len(got["a"]) + len(got["b"]) >= total:
                    finished.set()

    workers = [threading.Thread(target=consume, args=(name,)) for name in got]
    for worker in workers:
        worker.start()
    finished.wait(timeout=30)
    finished.set()
    for worker in workers:
        worker.join(timeout=30)
    everything = got["a"] + got["b"]
    assert sorted(everything, key=int) == [str(i) for i in range(total)]  # each exactly once
    assert broker.queue_depth("q") == 0


@pytest.mark.processes  # the servicebus_broker process
def test_async_client_send_receive_complete(servicebus_broker: BrokerProcess) -> None:
    async def round_trip() -> tuple[str, int | None]:
        async with AsyncServiceBusClient.from_connection_string(
            servicebus_broker.connection_string
        ) as client:
            async with client.get_queue_sender("agent-requests") as sender:
                await sender.send_messages(ServiceBusMessage("aio", message_id=f"aio-{uuid.uuid4()}"))
            async with client.get_queue_receiver("agent-requests") as receiver:
                [received] = await receiver.receive_messages(max_wait_time=5)
                await receiver.complete_message(received)
                assert await receiver.receive_messages(max_wait_time=0.3) == []
                return str(received), received.delivery_count

    assert asyncio.run(round_trip()) == ("aio", 0)


@pytest.mark.processes  # the servicebus_broker process
def test_unknown_queue_is_a_clear_error(servicebus_broker: BrokerProcess) -> None:
    with ServiceBusClient.from_connection_string(servicebus_broker.connection_string) as client:
        with (
            pytest.raises(MessagingEntityNotFoundError, match="no-such-queue"),
            client.get_queue_sender("no-such-queue") as sender,
        ):
            sender.send_messages(ServiceBusMessage("lost"))
        with (
            pytest.raises(MessagingEntityNotFoundError, match="no-such-queue"),
            client.get_queue_receiver("no-such-queue") as receiver,
        ):
            receiver.receive_messages(max_wait_time=1)
