"""What the queue-triggered functions do with a message: submissions (E1-E2) and agent replies (E9).

A message that cannot be processed is dead-lettered with a reason, never retried forever, and an
operator is alerted; nothing stored is overwritten.
"""

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from domain import transitions
from domain.errors import DependencyUnavailable, PreconditionFailed
from domain.ids import EVENT_NAME_PATTERN, INSTANCE_ID_PATTERN, parse_instance_id, reply_event, url_segment
from domain.messages import AgentReply, InvalidMessage, QueuedOrder, clipped, parse_message
from domain.states import OrderStatus, ProcessState
from services.context import Ports
from services.notifications import post_status, raise_alert
from services.submit_order import SubmitOutcome, SubmitResult, conflict_detail, submit_order
from services.telemetry import order_span

log = logging.getLogger("sas.intake")

_REASONS = {SubmitOutcome.CONFLICT: "OrderConflict", SubmitOutcome.REJECTED: "SubmissionRejected"}


@dataclass(frozen=True)
class HeldMessage:
    """The message a trigger holds: enough to dead-letter it and to name it in alerts."""

    queue: str
    message_id: str
    lock_token: str
    body: bytes
    properties: Mapping[str, object] = field(default_factory=dict)


def _reject(
    ports: Ports,
    held: HeldMessage,
    reason: str,
    description: str,
    *,
    order_id: str | None,
    event: str = "SubmissionRejected",
) -> None:
    # The alert first: where the host cannot dead-letter for the app (Azure without the SDK-type
    # binding), the failed settlement makes the broker redeliver, and the reason is already out.
    raise_alert(
        ports.sender,
        queue=ports.settings.alerts_queue,
        event=event,
        reason=f"{reason} on {held.queue} message {held.message_id}: {description}",
        now=ports.clock.now(),
        order_id=order_id,
        dedup_key=held.message_id,
    )
    ports.settlement.dead_letter(held.queue, held.lock_token, clipped(reason), clipped(description))


def handle_submission(held: HeldMessage, ports: Ports) -> SubmitResult | None:
    try:
        submission = parse_message(QueuedOrder, held.body)
    except InvalidMessage as invalid:
        with order_span("submission.rejected", None, reason=invalid.reason, message_id=held.message_id):
            _reject(ports, held, invalid.reason, invalid.description, order_id=None)
        return None
    with order_span(
        "submission", submission.OrderID, message_id=held.message_id, app=submission.SubmittedBy
    ) as span:
        result = _submit(submission, held, ports)
        span.set_attribute("sas.outcome", result.outcome.value)
        return result


def _submit(submission: QueuedOrder, held: HeldMessage, ports: Ports) -> SubmitResult:
    settings = ports.settings
    result = submit_order(
        submission,
        orders=ports.orders,
        states=ports.states,
        clock=ports.clock,
        policy=settings.scheduler_policy,
        submitters=settings.submitters,
        workflow_version=settings.workflow_version,
    )
    if result.stored is not None:
        ports.records.remember(result.stored)
    registered = settings.submitters.named(submission.SubmittedBy) is not None
    reason = None if result.ok else _REASONS[result.outcome]
    if result.ok or registered:
        # A refused order of a known app is told on its own queue too: never silent.
        post_status(
            ports.sender,
            queue=submission.status_queue,
            order_id=submission.OrderID,
            status=OrderStatus.RECEIVED if result.ok else OrderStatus.REJECTED,
            now=ports.clock.now(),
            detail=None if result.ok else f"{reason}: {_told(result)}",
            message_id=None if result.ok else f"{submission.OrderID}:rejected:{held.message_id}",
        )
    if reason is not None:
        _reject(ports, held, reason, result.reason or "", order_id=submission.OrderID)
    return result


@dataclass(frozen=True)
class ReplyEvent:
    """A valid reply and where it goes: the instance and the event name, each checked against
    its alphabet and percent-encoded, as path segments of the Durable API's
    ``.../instances/{instance}/raiseEvent/{event}`` (which the Durable client builds unescaped)."""

    reply: AgentReply
    instance: str
    event: str

    @property
    def order_id(self) -> str:
        return parse_instance_id(self.reply.InstanceID)[0]


def _told(result: SubmitResult) -> str:
    """A refusal as its submitter hears it. A conflict says no more than the front end's 409
    (the reason, with which store held what, is for the dead letter and the operator)."""
    if result.outcome is SubmitOutcome.CONFLICT:
        return conflict_detail(result.order_id)
    return result.reason or ""


def parse_reply(held: HeldMessage, ports: Ports) -> ReplyEvent | None:
    """The reply and where to raise it, or None: it was dead-lettered with the reason, and an
    operator alerted. Nothing that fails here is ever raised."""
    try:
        reply = parse_message(AgentReply, held.body)
        return ReplyEvent(
            reply,
            instance=url_segment(reply.InstanceID, INSTANCE_ID_PATTERN),
            event=url_segment(reply_event(reply.RequestID), EVENT_NAME_PATTERN),
        )
    except InvalidMessage as invalid:
        _reject(ports, held, invalid.reason, invalid.description, order_id=None, event="MessageRejected")
    except ValueError as invalid:  # AgentReply checks the same patterns: a second line only
        _reject(ports, held, "InvalidIdentifier", str(invalid), order_id=None, event="MessageRejected")
    return None


def is_late_reply_error(error: Exception) -> bool:
    """The Durable client's words for 410 (instance finished) and 404 (unknown instance)."""
    text = str(error)
    return "is gone" in text or "No instance with ID" in text


def give_up(held: HeldMessage, error: Exception, ports: Ports) -> None:
    """The last delivery of a submission failed too: dead-letter it with the cause, and alert."""
    description = f"{type(error).__name__}: {error}"[:1000]
    order_id = _end_held_record(held, "ProcessingFailed", description, ports)
    _reject(ports, held, "ProcessingFailed", description + _resubmit_hint(held, order_id), order_id=order_id)


def _resubmit_hint(held: HeldMessage, order_id: str | None) -> str:
    if order_id is None:
        return ""
    return (
        f"; to bring order {order_id} in when its store"
        f" answers: ops dlq resubmit {held.queue} {held.message_id}"
    )


def _end_held_record(held: HeldMessage, reason: str, description: str, ports: Ports) -> str | None:
    """A submission that is dead-lettered may have a held record (its 202 was answered while the
    orders database was down): end it visibly, in Error naming the dead letter, instead of leaving
    it Pending for ever. The OrderID the alert names, or None for a body that is no order.

    The order's lines live only in the dead letter, so a copy of the submission (the operator's
    resubmit of the dead letter, or the submitter's post again) is what writes the row and
    releases the record (``transitions.order_row_written``): nothing accepted is lost."""
    try:
        order_id = parse_message(QueuedOrder, held.body).OrderID
    except InvalidMessage:
        return None
    try:
        stored = ports.states.get(order_id)
        waiting = stored is not None and stored.record.ProcessState is ProcessState.PENDING
        if stored is not None and waiting and transitions.is_awaiting_order_row(stored.record):
            ended = transitions.order_row_given_up(
                stored.record,
                ports.clock.now(),
                f"{reason}: its submission was dead-lettered on {held.queue} as message "
                f"{held.message_id} ({description[:300]}); resubmit the dead letter",
            )
            ports.states.replace(ended, stored.etag)
    except (DependencyUnavailable, PreconditionFailed) as error:
        # The state store is down too, or a copy released the record meanwhile: the alert and
        # the dead letter still name the order.
        log.warning("held record of %s left as it is: %s", order_id, error)
    return order_id


# Application properties of a postponed copy: how often it was postponed, and the MessageId of
# the first delivery (each copy needs a MessageId of its own, or duplicate detection drops it).
POSTPONED = "sas-postponed"
FIRST_MESSAGE_ID = "sas-first-message-id"


def postpone(held: HeldMessage, outage: DependencyUnavailable, ports: Ports) -> None:
    """A store stayed down for a whole retry budget: send this submission again for later, as a
    scheduled copy, and let the trigger complete the original. Service Bus would redeliver an
    abandoned message at once and dead-letter a valid order after MaxDeliveryCount quick
    failures; this rides out outages up to the postponement horizon (the default: over an hour).

    Idempotent either way: a crash between the send and the completion leaves two copies, and
    the second is a duplicate submission (same OrderID and hash). Past the limit the message is
    dead-lettered ``DependencyUnavailable`` with an alert: an operator resubmits it.
    """
    postponed = int(str(held.properties.get(POSTPONED, 0)))
    delay = ports.settings.postponement.delay(postponed)
    if delay is None:
        description = f"{outage} (postponed {postponed} times)"
        order_id = _end_held_record(held, "DependencyUnavailable", description, ports)
        hint = _resubmit_hint(held, order_id)
        _reject(ports, held, "DependencyUnavailable", description + hint, order_id=order_id)
        return
    first = str(held.properties.get(FIRST_MESSAGE_ID, held.message_id))
    ports.sender.send(
        held.queue,
        held.body.decode(),
        message_id=f"{first}.p{postponed + 1}",
        properties={POSTPONED: str(postponed + 1), FIRST_MESSAGE_ID: first},
        scheduled_at=ports.clock.now() + delay,
    )
    log.warning(
        "submission %s postponed by %s (%d of %d): %s",
        first,
        delay,
        postponed + 1,
        ports.settings.postponement.limit,
        outage,
    )


# Every key the Service Bus extension (5.x) binds for one message
# (azure-sdk-for-net, Microsoft.Azure.WebJobs.Extensions.ServiceBus,
# ``ServiceBusTriggerBindingStrategy.GetBindingContract``). For a body it binds as text, the
# Functions host then binds the JSON body's top-level properties over those values,
# case-insensitively (azure-functions-host, ``WorkerFunctionInvoker.TransformInput``), and the
# Python library builds the message the function reads (``func.ServiceBusMessage``: its ID, lock
# token, delivery count, ...) from that metadata: a body naming any of these would set what the
# function sees. This app's triggers take the body as bytes (``function_app.BODY_AS_SENT``), which
# the host binds nothing from; such a body is still refused, in case a trigger is ever bound as text.
TRIGGER_METADATA = (
    "DeliveryCount",
    "DeadLetterSource",
    "LockToken",
    "ExpiresAtUtc",
    "ExpiresAt",
    "EnqueuedTimeUtc",
    "EnqueuedTime",
    "MessageId",
    "ContentType",
    "ReplyTo",
    "SequenceNumber",
    "To",
    "Subject",
    "Label",
    "CorrelationId",
    "ApplicationProperties",
    "UserProperties",
    "SessionId",
    "ReplyToSessionId",
    "PartitionKey",
    "TransactionPartitionKey",
    "MessageReceiver",
    "MessageSession",
    "MessageActions",
    "SessionActions",
    "ReceiveActions",
    "Client",
)
_TRIGGER_METADATA = {name.lower(): name for name in TRIGGER_METADATA}
# A key spelled without escapes appears in the bytes, quoted; one spelled with an escape
# (``"\u0044eliveryCount"``) holds a backslash. A body with neither names no trigger metadata.
_QUOTED_KEYS = tuple(f'"{name}"'.encode() for name in _TRIGGER_METADATA)


class ShadowedMetadata(Exception):
    """A message whose body names trigger metadata: bound as text, nothing it said of itself could
    be trusted, its lock token included, so it is not dead-lettered by the app; the broker does
    that after ``MaxDeliveryCount``."""


def shadowed_metadata(body: bytes) -> list[str]:
    """The trigger metadata names a body shadows, in the extension's spelling (none for a body
    that is not a JSON object). Decided on the keys as JSON decodes them, as the host reads them."""
    lowered = body.lower()
    if b"\\" not in body and not any(key in lowered for key in _QUOTED_KEYS):
        return []  # the common case, without parsing the body twice
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return []
    if not isinstance(value, dict):
        return []
    return sorted({_TRIGGER_METADATA[key.lower()] for key in value if key.lower() in _TRIGGER_METADATA})


def refuse_shadowed(
    queue: str, message_id: str, body: bytes, names: list[str], ports: Ports
) -> ShadowedMetadata:
    """Alert once per message (not per delivery) and return the error to raise: the message is
    abandoned, never acted on. The alert names the message's ID (the broker's: the body is bound
    as bytes) so an operator can match it to its dead letter."""
    digest = hashlib.sha256(message_id.encode() + b"\0" + body).hexdigest()[:32]
    raise_alert(
        ports.sender,
        queue=ports.settings.alerts_queue,
        event="MessageRejected",
        reason=f"MetadataInBody on {queue}: message {message_id} sets trigger metadata "
        f"{', '.join(names)} in its body; the message is left to the broker's dead-letter queue",
        now=ports.clock.now(),
        order_id=None,
        dedup_key=f"shadowed:{digest}",
    )
    return ShadowedMetadata(
        f"the body of message {message_id} on {queue} sets trigger metadata {', '.join(names)}"
    )
