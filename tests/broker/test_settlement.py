"""Peek-lock settlement, locks and the broker's timers, seen through the SDK.

Timer tests use queues with second-long durations and wait on the real clock, each by receiving
(or polling the broker) against a deadline rather than sleeping for a guessed time.
"""

import time
from datetime import UTC, datetime, timedelta

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.exceptions import MessageLockLostError

from tests.broker.support import PLAIN, receive_until
from tests.servicebus_broker import BrokerFactory

SHORT_LOCK = {"MaxDeliveryCount": 10, "LockDuration": "PT1S"}


def _wait_until(moment: datetime) -> None:
    """Let wall-clock time pass a broker-side deadline (a lock expiry, a window's end)."""
    while (left := (moment - datetime.now(UTC)).total_seconds()) > 0:
        time.sleep(min(left, 0.1))


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


def test_expired_lock_makes_the_message_available_again(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": SHORT_LOCK})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("slow", message_id="m-1"))
        with client.get_queue_receiver("q") as holder, client.get_queue_receiver("q") as other:
            [held] = receive_until(holder, 1)
            [again] = receive_until(other, 1, within=3.0)  # arrives once the 1 s lock runs out
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
            assert received.locked_until_utc is not None
            _wait_until(received.locked_until_utc)
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
            # Keep renewing past the first expiry: the lock must hold throughout.
            while datetime.now(UTC) < first_expiry + timedelta(seconds=0.5):
                renewed = receiver.renew_message_lock(received)
                assert renewed > first_expiry - timedelta(seconds=1)
                assert received.locked_until_utc == renewed
                time.sleep(0.3)  # the job's work between renewals
            assert received.locked_until_utc is not None and received.locked_until_utc > first_expiry
            receiver.complete_message(received)
    assert broker.queue_depth("q") == 0


def test_duplicate_detection_drops_repeats_within_the_window(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with(
        {
            "q": {
                "MaxDeliveryCount": 10,
                "LockDuration": "PT1M",
                "RequiresDuplicateDetection": True,
                "DuplicateDetectionHistoryTimeWindow": "PT1S",
            }
        }
    )
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            first_sent = datetime.now(UTC)
            sender.send_messages(ServiceBusMessage("one", message_id="same"))
            sender.send_messages(ServiceBusMessage("two", message_id="same"))  # accepted, dropped
            sender.send_messages(ServiceBusMessage("other", message_id="different"))
            assert broker.queue_depth("q") == 2
            _wait_until(first_sent + timedelta(seconds=1.1))
            sender.send_messages(ServiceBusMessage("three", message_id="same"))
            assert broker.queue_depth("q") == 3
        with client.get_queue_receiver("q") as receiver:
            received = receive_until(receiver, 3)
            assert [str(m) for m in received] == ["one", "other", "three"]
            for message in received:
                receiver.complete_message(message)


def test_expired_message_is_dead_lettered(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with(
        {"q": {"MaxDeliveryCount": 10, "LockDuration": "PT1M", "DeadLetteringOnMessageExpiration": True}}
    )
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("q") as sender,
        client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters,
    ):
        # The SDK sends time-to-live in whole seconds.
        sender.send_messages(ServiceBusMessage("stale", time_to_live=timedelta(seconds=1)))
        [dead] = receive_until(dead_letters, 1, within=3.0)
        assert str(dead) == "stale"
        assert dead.dead_letter_reason == "TTLExpiredException"
        dead_letters.complete_message(dead)
    assert broker.queue_depth("q") == 0


def test_scheduled_message_appears_at_its_time(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("q") as sender,
        client.get_queue_receiver("q") as receiver,
    ):
        at = datetime.now(UTC) + timedelta(seconds=1)
        [number] = sender.schedule_messages(ServiceBusMessage("later", message_id="s-1"), at)
        [cancelled] = sender.schedule_messages(ServiceBusMessage("never", message_id="s-2"), at)
        sender.cancel_scheduled_messages(cancelled)
        assert broker.queue_depth("q") == 1
        assert receiver.receive_messages(max_wait_time=0.3) == []  # not yet
        [received] = receive_until(receiver, 1, within=3.0)
        assert datetime.now(UTC) >= at
        assert (received.message_id, received.sequence_number) == ("s-1", number)
        receiver.complete_message(received)
        assert receiver.receive_messages(max_wait_time=0.3) == []  # the cancelled one never comes
    assert broker.queue_depth("q") == 0
