"""Helpers for the broker tests: every client here is the real azure-servicebus SDK."""

import time
from collections.abc import Mapping
from typing import Any

from azure.servicebus import ServiceBusReceivedMessage, ServiceBusReceiver

# Config.json properties of a queue for tests that do not care about the timers.
PLAIN: Mapping[str, Any] = {"MaxDeliveryCount": 10, "LockDuration": "PT1M"}


def receive_until(
    receiver: ServiceBusReceiver, count: int, within: float = 5.0
) -> list[ServiceBusReceivedMessage]:
    """Receive until ``count`` messages arrived or ``within`` seconds passed (then fewer)."""
    received: list[ServiceBusReceivedMessage] = []
    deadline = time.monotonic() + within
    while len(received) < count and (left := deadline - time.monotonic()) > 0:
        received += receiver.receive_messages(max_message_count=count - len(received), max_wait_time=left)
    return received
