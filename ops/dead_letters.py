"""Dead-letter queues: list a queue's dead letters, move one back to its queue."""

from adapters.servicebus.messages import dead_letter_queue
from ops.errors import Refused
from ops.output import Output
from ops.queues import QueueBrowser, known_queue
from settings import Settings


def list_dead_letters(settings: Settings, queue: QueueBrowser, out: Output, name: str) -> None:
    rows = [
        {
            "MessageId": m.message_id,
            "Reason": m.dead_letter_reason,
            "Description": (m.dead_letter_error_description or "")[:80],
            "Enqueued": m.enqueued_time.isoformat(timespec="seconds"),
            "Deliveries": m.delivery_count,
        }
        for m in queue.peek(dead_letter_queue(known_queue(settings, name)), 1000)
    ]
    out.show(
        f"Dead letters of {name}", rows, ["MessageId", "Reason", "Description", "Enqueued", "Deliveries"]
    )


def resubmit(settings: Settings, queue: QueueBrowser, out: Output, name: str, message_id: str) -> None:
    """Only the message moved is received: the others are peeked, their delivery counts unchanged."""
    if not queue.resubmit_dead_letter(known_queue(settings, name), message_id):
        raise Refused(f"no dead-lettered message {message_id!r} on {name!r}")
    out.show("Resubmitted", [{"Queue": name, "MessageId": message_id}], ["Queue", "MessageId"])
