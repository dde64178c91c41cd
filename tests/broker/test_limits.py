"""Azure Service Bus Standard-tier limits, enforced by the broker as the service enforces them.

A message or a queue definition that Azure would refuse must fail locally too: the 256 KB message
size (advertised on the sender's link and checked on every transfer) and the ranges Azure accepts
for a queue's LockDuration, MaxDeliveryCount, DuplicateDetectionHistoryTimeWindow and
DefaultMessageTimeToLive (refused when the broker loads its Config.json).
"""

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.servicebus.exceptions import MessageSizeExceededError
from proton import Message

from harness.standins.amqp_broker import limits
from harness.standins.amqp_broker.config import QueueSettings, load_queues, queues_from_config
from tests.support.broker import CONFIG, BrokerFactory, run_broker_command
from tests.support.broker_clients import PLAIN, receive_until, send_raw

LIMIT = 256 * 1024


def _encoded_message_of(size: int) -> bytes:
    """An AMQP message whose encoding (every section, as on the wire) is exactly ``size`` bytes
    (a body of more than 255 bytes, so that its length takes four bytes)."""
    overhead = len(Message(body=b"x" * 1000, id="m").encode()) - 1000
    payload = Message(body=b"x" * (size - overhead), id="m").encode()
    assert len(payload) == size
    return payload


# --- message size ------------------------------------------------------------------------------


def test_the_sender_link_advertises_the_standard_tier_limit(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("q") as sender,
    ):
        batch = sender.create_message_batch()  # opens the link and reads the attach
        assert limits.MAX_MESSAGE_SIZE == LIMIT
        # What the SDK read from the broker's attach, and the batch limit it derives from it.
        assert sender._max_message_size_on_link == LIMIT
        assert batch.max_size_in_bytes == LIMIT
    [outcome] = send_raw(broker.url, "q", [_encoded_message_of(1000)])
    assert outcome.link_max_message_size == LIMIT


def test_a_message_under_256_kb_arrives_and_one_over_raises_message_size_exceeded(
    servicebus_broker_with: BrokerFactory,
) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            # The body plus the SDK's header and properties: just under the limit.
            sender.send_messages(ServiceBusMessage(b"u" * (LIMIT - 200), message_id="under"))
            # A message on its own is not measured by the SDK (pyamqp): the broker refuses the
            # transfer and the SDK raises the service's error.
            with pytest.raises(MessageSizeExceededError, match=r"exceeds the limit \(262144 bytes\)"):
                sender.send_messages(ServiceBusMessage(b"o" * LIMIT, message_id="over"))
            # A list goes in a batch the SDK sizes by the link's limit: refused before sending.
            with pytest.raises(MessageSizeExceededError, match="size limit: 262144"):
                sender.send_messages([ServiceBusMessage(b"o" * LIMIT, message_id="over-in-a-list")])
            # Refusing one transfer does not break the link.
            sender.send_messages(ServiceBusMessage(b"after", message_id="after"))
        assert broker.queue_depth("q") == 2
        with client.get_queue_receiver("q") as receiver:
            received = receive_until(receiver, 2)
            for message in received:
                receiver.complete_message(message)
    assert [m.message_id for m in received] == ["under", "after"]
    assert len(b"".join(received[0].body)) == LIMIT - 200


def test_the_broker_itself_refuses_a_transfer_over_256_kb(servicebus_broker_with: BrokerFactory) -> None:
    """A bare AMQP sender, no SDK check in the way: the limit is the broker's, to the byte, and the
    answer is Service Bus's: rejected with amqp:link:message-size-exceeded."""
    broker = servicebus_broker_with({"q": PLAIN})
    at_limit, over = send_raw(broker.url, "q", [_encoded_message_of(LIMIT), _encoded_message_of(LIMIT + 1)])
    assert at_limit.accepted and at_limit.condition is None
    assert not over.accepted
    assert over.condition is not None
    assert over.condition.name == "amqp:link:message-size-exceeded"
    assert over.condition.description == (
        "The received message (size:262145 bytes) exceeds the limit (262144 bytes) "
        "currently allowed on the link."
    )
    assert broker.queue_depth("q") == 1


def test_scheduling_a_message_over_256_kb_is_refused(servicebus_broker_with: BrokerFactory) -> None:
    broker = servicebus_broker_with({"q": PLAIN})
    with (
        ServiceBusClient.from_connection_string(broker.connection_string) as client,
        client.get_queue_sender("q") as sender,
    ):
        at = datetime.now(UTC) + timedelta(minutes=5)
        with pytest.raises(MessageSizeExceededError):
            sender.schedule_messages([ServiceBusMessage("small"), ServiceBusMessage(b"o" * LIMIT)], at)
    assert broker.queue_depth("q") == 0  # all or nothing


# --- queue properties --------------------------------------------------------------------------


def _document(props: Mapping[str, Any], name: str = "Orders") -> dict[str, Any]:
    return {
        "UserConfig": {"Namespaces": [{"Name": "ns", "Queues": [{"Name": name, "Properties": dict(props)}]}]}
    }


@pytest.mark.parametrize(
    ("props", "refused"),
    [
        ({"LockDuration": "PT4S"}, "LockDuration PT4S is outside .* PT5S..PT5M"),
        ({"LockDuration": "PT0S"}, "LockDuration PT0S is outside .* PT5S..PT5M"),
        ({"LockDuration": "PT5M1S"}, "LockDuration PT5M1S is outside .* PT5S..PT5M"),
        ({"MaxDeliveryCount": 0}, "MaxDeliveryCount 0 is outside .* 1..2147483647"),
        ({"MaxDeliveryCount": 2**31}, "MaxDeliveryCount 2147483648 is outside .* 1..2147483647"),
        ({"MaxDeliveryCount": "ten"}, "MaxDeliveryCount must be an integer"),
        (
            {"RequiresDuplicateDetection": True, "DuplicateDetectionHistoryTimeWindow": "PT19S"},
            "DuplicateDetectionHistoryTimeWindow PT19S is outside .* PT20S..P7D",
        ),
        (
            {"RequiresDuplicateDetection": True, "DuplicateDetectionHistoryTimeWindow": "P7DT1S"},
            "DuplicateDetectionHistoryTimeWindow P7DT1S is outside .* PT20S..P7D",
        ),
        (  # refused even where duplicate detection is off: it is still in the definition
            {"RequiresDuplicateDetection": False, "DuplicateDetectionHistoryTimeWindow": "PT1S"},
            "DuplicateDetectionHistoryTimeWindow PT1S is outside .* PT20S..P7D",
        ),
        ({"DefaultMessageTimeToLive": "PT0S"}, "DefaultMessageTimeToLive PT0S is outside .* at least PT1S"),
        (
            {"DefaultMessageTimeToLive": "PT0.5S"},
            "DefaultMessageTimeToLive PT0.5S is outside .* at least PT1S",
        ),
        ({"LockDuration": "five seconds"}, "LockDuration: not an ISO 8601 duration"),
    ],
)
def test_queue_properties_azure_refuses_are_refused_naming_queue_and_property(
    props: Mapping[str, Any], refused: str
) -> None:
    with pytest.raises(ValueError, match=f"queue 'Orders': {refused}"):
        queues_from_config(_document(props))


def test_the_edges_of_the_standard_tier_ranges_are_accepted() -> None:
    lowest, highest = (
        queues_from_config(
            _document(
                {
                    "LockDuration": lock,
                    "MaxDeliveryCount": count,
                    "RequiresDuplicateDetection": True,
                    "DuplicateDetectionHistoryTimeWindow": window,
                    "DefaultMessageTimeToLive": ttl,
                },
                name,
            )
        )[0]
        for name, lock, count, window, ttl in (
            ("low", "PT5S", 1, "PT20S", "PT1S"),
            ("high", "PT5M", 2**31 - 1, "P7D", "P10675199D"),  # TimeSpan.MaxValue, in whole days
        )
    )
    assert lowest == QueueSettings(
        "low",
        max_delivery_count=1,
        lock_duration=timedelta(seconds=5),
        duplicate_detection_window=timedelta(seconds=20),
        default_message_ttl=timedelta(seconds=1),
    )
    assert (highest.lock_duration, highest.max_delivery_count) == (timedelta(minutes=5), 2**31 - 1)
    assert (highest.duplicate_detection_window, highest.default_message_ttl) == (
        timedelta(days=7),
        timedelta(days=10675199),
    )


def test_settings_built_in_code_are_held_to_the_same_limits() -> None:
    with pytest.raises(ValueError, match="queue 'q': LockDuration PT1S"):
        QueueSettings("q", lock_duration=timedelta(seconds=1))
    with pytest.raises(ValueError, match="queue 'q': DuplicateDetectionHistoryTimeWindow PT10S"):
        QueueSettings("q", duplicate_detection_window=timedelta(seconds=10))


def test_the_repository_config_is_within_the_limits() -> None:
    assert {q.name for q in load_queues(CONFIG)} >= {"orders", "agent-requests", "agent-replies"}


@pytest.mark.processes  # python -m harness.standins.amqp_broker
def test_the_command_refuses_such_a_config_at_start_up(tmp_path: Path) -> None:
    config = tmp_path / "Config.json"
    config.write_text(json.dumps(_document({"MaxDeliveryCount": 10, "LockDuration": "PT1S"})))
    result = run_broker_command(config)
    assert result.returncode == 2
    assert "queue 'Orders': LockDuration PT1S is outside" in result.stderr
    assert result.stdout == ""  # never said Ready
