"""The queues as operators see them: browsed (peeked), never received unless moved or removed."""

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from ops.errors import BadArgument, Refused
from services.context import Ports
from settings import Settings


class BrowsedMessage(Protocol):
    @property
    def message_id(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def delivery_count(self) -> int: ...
    @property
    def enqueued_time(self) -> datetime: ...
    @property
    def dead_letter_reason(self) -> str | None: ...
    @property
    def dead_letter_error_description(self) -> str | None: ...


@runtime_checkable
class QueueBrowser(Protocol):
    """What both messaging adapters (the local bus, Service Bus) offer operators."""

    def peek(self, queue: str, limit: int) -> Sequence[BrowsedMessage]: ...
    def resubmit_dead_letter(self, queue: str, message_id: str) -> bool: ...
    def remove(self, queue: str, message_ids: set[str] | None) -> list[str]: ...


def browser(ports: Ports) -> QueueBrowser:
    # The messaging adapter itself: the sender is wrapped in the transient-fault policy.
    messaging = ports.settlement
    if not isinstance(messaging, QueueBrowser):
        raise Refused(f"queue browsing is not available for profile {ports.settings.profile!r}")
    return messaging


def known_queue(settings: Settings, queue: str) -> str:
    known = [
        settings.orders_queue,
        settings.agent_requests_queue,
        settings.agent_replies_queue,
        settings.alerts_queue,
        *settings.submitters.status_queues,
    ]
    if queue not in known:
        raise BadArgument(f"unknown queue {queue!r} (the app's queues: {', '.join(known)})")
    return queue


def bodies(queue: QueueBrowser, name: str, order_id: str) -> list[dict[str, Any]]:
    """The JSON bodies of the messages on queue ``name`` about one order, oldest first."""
    found = []
    for message in queue.peek(name, 1000):
        try:
            body = json.loads(message.body)
        except ValueError:
            continue
        if isinstance(body, dict) and body.get("OrderID") == order_id:
            found.append(body)
    return found
