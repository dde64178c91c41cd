"""Operator alerts: list those waiting, and acknowledge them by removing them from their queue
(which clears the "operator alerts waiting" alert rule)."""

import json

from ops.errors import Refused
from ops.output import Output
from ops.queues import QueueBrowser
from settings import Settings


def list_alerts(settings: Settings, queue: QueueBrowser, out: Output, limit: int) -> None:
    rows = [
        {"MessageId": m.message_id, **json.loads(m.body)} for m in queue.peek(settings.alerts_queue, limit)
    ]
    out.show("Operator alerts", rows, ["MessageId", "At", "Event", "OrderID", "Reason"])


def remove(
    settings: Settings, queue: QueueBrowser, out: Output, message_ids: list[str] | None, event: str | None
) -> None:
    """``ack`` names the alerts (message IDs), ``drain`` at most an event: each lacks the other."""
    name = settings.alerts_queue
    wanted: set[str] | None = None if message_ids is None else set(message_ids)
    if event is not None:
        wanted = {m.message_id for m in queue.peek(name, 10_000) if json.loads(m.body).get("Event") == event}
    removed = queue.remove(name, wanted)
    missing = sorted((set(message_ids) if message_ids else set()) - set(removed))
    if missing:
        raise Refused(f"no alert {', '.join(map(repr, missing))} on {name!r} (removed {len(removed)})")
    out.show("Acknowledged", [{"MessageId": m} for m in removed], ["MessageId"])
