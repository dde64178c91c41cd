"""Clients for the broker tests: every client here is the real azure-servicebus SDK, except
``send_raw``, a bare AMQP sender for what the SDK would stop before it reached the broker."""

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage, ServiceBusReceiver
from proton import Condition, Disposition, Link
from proton.utils import BlockingConnection

# Config.json properties of a queue for tests that do not care about the timers.
PLAIN: Mapping[str, Any] = {"MaxDeliveryCount": 10, "LockDuration": "PT1M"}
# The shortest lock Azure Service Bus accepts; tests move the broker's clock past it.
SHORT_LOCK: Mapping[str, Any] = {"MaxDeliveryCount": 10, "LockDuration": "PT5S"}


def receive_until(
    receiver: ServiceBusReceiver, count: int, within: float = 5.0
) -> list[ServiceBusReceivedMessage]:
    """Receive until ``count`` messages arrived or ``within`` seconds passed (then fewer)."""
    received: list[ServiceBusReceivedMessage] = []
    deadline = time.monotonic() + within
    while len(received) < count and (left := deadline - time.monotonic()) > 0:
        received += receiver.receive_messages(max_message_count=count - len(received), max_wait_time=left)
    return received


@dataclass(frozen=True)
class RawOutcome:
    """What the broker answered a bare transfer with, and the limit its link advertised."""

    accepted: bool
    condition: Condition | None
    link_max_message_size: int


def send_raw(url: str, address: str, payloads: list[bytes], timeout: float = 10.0) -> list[RawOutcome]:
    """Send encoded AMQP messages as they are, one transfer each, over one plain AMQP link."""
    connection = BlockingConnection(url, timeout=timeout)
    try:
        link = connection.create_sender(address).link
        return [_transfer(connection, link, str(number), payload) for number, payload in enumerate(payloads)]
    finally:
        connection.close()


def _transfer(connection: BlockingConnection, link: Link, tag: str, payload: bytes) -> RawOutcome:
    delivery = link.delivery(tag)
    link.send(payload)
    link.advance()
    connection.wait(lambda: delivery.settled, msg="the broker did not settle the transfer")
    return RawOutcome(
        accepted=delivery.remote_state == Disposition.ACCEPTED,
        condition=delivery.remote.condition,
        link_max_message_size=link.remote_max_message_size,
    )
