"""Message time-to-live, on the broker's clock, as Service Bus applies it.

A message expires at its enqueued time plus the smaller of its own TimeToLive and the queue's
DefaultMessageTimeToLive; an expired message is dead-lettered (``TTLExpiredException``) when the
queue has DeadLetteringOnMessageExpiration, else dropped; a locked message does not expire until
its lock is released (https://learn.microsoft.com/azure/service-bus-messaging/message-expiration).
``Broker.advance`` moves the broker's clock and runs its timers, so nothing here sleeps.
"""

from datetime import UTC, datetime, timedelta

from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

from tests.support.broker import BrokerFactory
from tests.support.broker_clients import receive_until

EXPIRY_DEAD_LETTERS = {
    "MaxDeliveryCount": 10,
    "LockDuration": "PT1M",
    "DeadLetteringOnMessageExpiration": True,
}


def test_a_message_expires_after_the_smaller_of_its_ttl_and_the_queue_default(
    servicebus_broker_with: BrokerFactory,
) -> None:
    broker = servicebus_broker_with({"q": {**EXPIRY_DEAD_LETTERS, "DefaultMessageTimeToLive": "PT1M"}})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(
                [
                    ServiceBusMessage("own-20s", message_id="own", time_to_live=timedelta(seconds=20)),
                    ServiceBusMessage("capped", message_id="capped", time_to_live=timedelta(hours=1)),
                    ServiceBusMessage("default", message_id="default"),
                ]
            )
        # Margins of seconds either side: real time passes too (closing a sender takes ~1 s).
        broker.advance(15)
        assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (3, 0)
        broker.advance(10)  # 25 s: past the message's own 20 s
        assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (2, 1)
        broker.advance(30)  # 55 s: the queue's minute caps the hour and is the default's
        assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (2, 1)
        broker.advance(10)  # 65 s
        assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (0, 3)
        with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters:
            dead = receive_until(dead_letters, 3)
            for message in dead:
                dead_letters.complete_message(message)
    assert [m.message_id for m in dead] == ["own", "capped", "default"]
    assert {m.dead_letter_reason for m in dead} == {"TTLExpiredException"}
    assert {m.dead_letter_source for m in dead} == {"q"}


def test_an_expired_message_is_dropped_without_dead_lettering_on_expiration(
    servicebus_broker_with: BrokerFactory,
) -> None:
    broker = servicebus_broker_with(
        {"q": {"MaxDeliveryCount": 10, "LockDuration": "PT1M", "DefaultMessageTimeToLive": "PT5S"}}
    )
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("stale", message_id="m-1"))
        broker.advance(5.5)
        assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (0, 0)
        with client.get_queue_receiver("q") as receiver:
            assert receiver.receive_messages(max_wait_time=0.3) == []


def test_a_locked_message_expires_only_once_its_lock_is_given_back(
    servicebus_broker_with: BrokerFactory,
) -> None:
    broker = servicebus_broker_with({"q": EXPIRY_DEAD_LETTERS})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(
                [
                    ServiceBusMessage("finished", message_id="kept", time_to_live=timedelta(seconds=5)),
                    ServiceBusMessage(
                        "given back", message_id="abandoned", time_to_live=timedelta(seconds=5)
                    ),
                ]
            )
        with client.get_queue_receiver("q") as receiver:
            kept, abandoned = receive_until(receiver, 2)
            broker.advance(10)  # both past their TTL, both still locked (1 min)
            assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (2, 0)
            receiver.complete_message(kept)  # the holder may still finish an expired message
            receiver.abandon_message(abandoned)  # ... and once it is given back, it expires
            broker.advance(0)
            assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (0, 1)
            assert receiver.receive_messages(max_wait_time=0.3) == []
        with client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dead_letters:
            [dead] = receive_until(dead_letters, 1)
            assert (dead.message_id, dead.dead_letter_reason) == ("abandoned", "TTLExpiredException")
            dead_letters.complete_message(dead)


def test_a_scheduled_message_lives_from_its_enqueue_time(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": EXPIRY_DEAD_LETTERS})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            at = datetime.now(UTC) + timedelta(seconds=30)
            sender.schedule_messages(
                ServiceBusMessage("later", message_id="s-1", time_to_live=timedelta(seconds=5)), at
            )
        broker.advance(30)  # enqueued now, not expired though sent 30 s ago with a 5 s TTL
        assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (1, 0)
        with client.get_queue_receiver("q") as receiver:
            peeked = receiver.peek_messages(max_message_count=1)
            assert [m.message_id for m in peeked] == ["s-1"]
            broker.advance(5.5)
            assert (broker.queue_depth("q"), broker.dead_letter_depth("q")) == (0, 1)
