"""Peek-lock settlement, locks and the broker's timers, seen through the SDK.

Queues use durations Azure accepts (a lock of at least 5 s, a duplicate window of at least 20 s),
so timer tests move the broker's clock (``Broker.advance``, which also runs its timers) rather than
sleep; the SDK's clock stays where it is, so what fails below fails on the broker's word.
"""

from datetime import UTC, datetime, timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageLockLostError

from tests.support.broker import BrokerFactory
from tests.support.broker_clients import PLAIN, SHORT_LOCK, receive_until

PAST_THE_LOCK = 5.1  # seconds: just past SHORT_LOCK's lock duration


def test_abandon_redelivers_with_delivery_count_plus_one(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("again", message_id="m-1"))
        with client.get_queue_receiver("q") as receiver:
            [first] = receive_until(receiver, 1)
            receiver.abandon_message(first)
            [second] = receive_until(receiver, 1)
            assert (first.delivery_count, second.delivery_count) == (0, 1)
            assert second.message_id == "m-1"
            assert second.lock_token != first.lock_token
            receiver.complete_message(second)
    assert broker.queue_depth("q") == 0


def test_dead_letter_carries_reason_and_description(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(
                ServiceBusMessage("poison", message_id="m-1", application_properties={"k": "v"})
            )
        with client.get_queue_receiver("q") as receiver:
            [received] = receive_until(receiver, 1)
            receiver.dead_letter_message(received, reason="InvalidMessage", error_description="no OrderID")
        assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (0, 1)
        with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters:
            [dead] = receive_until(dead_letters, 1)
            assert str(dead) == "poison"
            assert dead.message_id == "m-1"
            assert dead.dead_letter_reason == "InvalidMessage"
            assert dead.dead_letter_error_description == "no OrderID"
            assert dead.dead_letter_source == "q"
            assert dead.application_properties is not None
            assert dead.application_properties[b"k"] == b"v"
            dead_letters.complete_message(dead)
    assert broker.dead_letter_depth("q") == 0


def test_max_delivery_count_moves_to_dead_letter_queue(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": {"MaxDeliveryCount": 2, "LockDuration": "PT1M"}})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("flaky", message_id="m-1"))
        with client.get_queue_receiver("q") as receiver:
            for expected_count in (0, 1):
                [received] = receive_until(receiver, 1)
                assert received.delivery_count == expected_count
                receiver.abandon_message(received)
            assert receiver.receive_messages(max_wait_time=0.3) == []
        with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters:
            [dead] = receive_until(dead_letters, 1)
            assert dead.message_id == "m-1"
            assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
            assert dead.dead_letter_error_description is not None
            dead_letters.complete_message(dead)


def test_lock_expiries_count_towards_max_delivery_count(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": {"MaxDeliveryCount": 2, "LockDuration": "PT5S"}})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("hangs", message_id="m-1"))
        with client.get_queue_receiver("q") as receiver:
            for expected_count in (0, 1):
                [received] = receive_until(receiver, 1)
                assert received.delivery_count == expected_count
                broker.advance(PAST_THE_LOCK)  # the receiver never settles it
            assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (0, 1)
        with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters:
            [dead] = receive_until(dead_letters, 1)
            assert (dead.message_id, dead.dead_letter_reason) == ("m-1", "MaxDeliveryCountExceeded")
            dead_letters.complete_message(dead)


def test_expired_lock_makes_the_message_available_again(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": SHORT_LOCK})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("slow", message_id="m-1"))
        with client.get_queue_receiver("q") as holder, client.get_queue_receiver("q") as other:
            [held] = receive_until(holder, 1)
            broker.advance(4)
            assert other.receive_messages(max_wait_time=0.3) == []  # still locked
            broker.advance(1.2)  # past the 5 s lock
            [again] = receive_until(other, 1)
            assert (again.message_id, again.delivery_count) == ("m-1", 1)
            other.complete_message(again)
            with pytest.raises(MessageLockLostError):
                holder.complete_message(held)
    assert broker.queue_depth("q") == 0


def test_settling_after_the_lock_expired_raises_lock_lost(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": SHORT_LOCK})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("late"))
        with client.get_queue_receiver("q") as receiver:
            [received] = receive_until(receiver, 1)
            broker.advance(PAST_THE_LOCK)  # the SDK's clock still says the lock holds
            with pytest.raises(MessageLockLostError):
                receiver.complete_message(received)
            with pytest.raises(MessageLockLostError):
                receiver.renew_message_lock(received)


def test_renew_lock_extends_locked_until(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": SHORT_LOCK})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("long job"))
        with client.get_queue_receiver("q") as receiver:
            [received] = receive_until(receiver, 1)
            first_expiry = received.locked_until_utc
            assert first_expiry is not None
            # Renew every 4 s of broker time, well past the first expiry: the lock must hold.
            for renewal in range(1, 4):
                broker.advance(4)
                renewed = receiver.renew_message_lock(received)
                assert renewed >= first_expiry + timedelta(seconds=4 * renewal - 0.1)
                assert received.locked_until_utc == renewed
            assert broker.queue_depth("q") == 1
            receiver.complete_message(received)  # 12 s in, on a 5 s lock
    assert broker.queue_depth("q") == 0


def test_duplicate_detection_drops_repeats_within_the_window(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with(
        {
            "q": {
                "MaxDeliveryCount": 10,
                "LockDuration": "PT1M",
                "RequiresDuplicateDetection": True,
                "DuplicateDetectionHistoryTimeWindow": "PT20S",  # the shortest Azure accepts
            }
        }
    )
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("one", message_id="same"))
            sender.send_messages(ServiceBusMessage("two", message_id="same"))  # accepted, dropped
            sender.send_messages(ServiceBusMessage("other", message_id="different"))
            assert broker.queue_depth("q") == 2
            broker.advance(15)
            sender.send_messages(ServiceBusMessage("late", message_id="same"))  # still in the window
            assert broker.queue_depth("q") == 2
            broker.advance(6)  # 21 s after "one": its id is forgotten
            sender.send_messages(ServiceBusMessage("three", message_id="same"))
            assert broker.queue_depth("q") == 3
        with client.get_queue_receiver("q") as receiver:
            received = receive_until(receiver, 3)
            assert [str(m) for m in received] == ["one", "other", "three"]
            for message in received:
                receiver.complete_message(message)


def test_scheduled_message_appears_at_its_time(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("q") as sender,
        client.get_queue_receiver("q") as receiver,
    ):
        at = datetime.now(UTC) + timedelta(minutes=1)
        [number] = sender.schedule_messages(ServiceBusMessage("later", message_id="s-1"), at)
        [cancelled] = sender.schedule_messages(ServiceBusMessage("never", message_id="s-2"), at)
        sender.cancel_scheduled_messages(cancelled)
        assert broker.queue_depth("q") == 1
        broker.advance(50)
        assert receiver.receive_messages(max_wait_time=0.3) == []  # not yet
        broker.advance(11)  # the broker's clock is past ``at`` now
        [received] = receive_until(receiver, 1)
        assert (received.message_id, received.sequence_number) == ("s-1", number)
        assert received.enqueued_time_utc is not None and received.enqueued_time_utc >= at - timedelta(
            seconds=1
        )
        receiver.complete_message(received)
        assert receiver.receive_messages(max_wait_time=0.3) == []  # the cancelled one never comes
    assert broker.queue_depth("q") == 0
