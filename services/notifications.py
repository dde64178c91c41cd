"""Status messages to the submitting app's own queue (E16) and operator alerts (E12, C11).

Both are sent with MessageIds derived from what they report, so a repeat of the activity that
sends them (activities are at-least-once) is dropped by duplicate detection.
"""

import contextlib
import logging
from datetime import datetime
from typing import TYPE_CHECKING

from domain import transitions
from domain.dependencies import ORDERS_DB, SERVICE_BUS
from domain.endings import Part
from domain.errors import DependencyUnavailable, IllegalTransition, PreconditionFailed, RecordNotFound
from domain.messages import OperatorAlert, StatusMessage
from domain.order_status import status_version
from domain.ports import MessageSender, Stored
from domain.record import StateRecord
from domain.states import OrderStatus
from services import telemetry
from services.fenced import MAX_RACES

if TYPE_CHECKING:
    from services.context import Ports

log = logging.getLogger("sas.notifications")


def post_status(
    sender: MessageSender,
    *,
    queue: str | None,
    order_id: str,
    status: OrderStatus,
    now: datetime,
    detail: str | None = None,
    message_id: str | None = None,
) -> None:
    """Post to the one queue the submitter registered in its record; never anywhere else."""
    if queue is None:
        log.warning("order %s has no status queue: %s not posted", order_id, status.value)
        return
    message = StatusMessage(OrderID=order_id, Status=status, At=now, Detail=detail)
    # A marker in the order's trace: the workbook's latency (submission to final status) and its
    # table of failed orders with their reasons read it.
    with telemetry.order_span("status", order_id, status=status.value, detail=(detail or "")[:500] or None):
        sender.send(
            queue,
            message.model_dump_json(),
            message_id=message_id or f"{order_id}:{status.value}",
            correlation_id=order_id,
        )


def raise_alert(
    sender: MessageSender,
    *,
    queue: str,
    event: str,
    reason: str,
    now: datetime,
    order_id: str | None = None,
    dedup_key: str | None = None,
    logged_once_queued: bool = False,
) -> None:
    """An operator alert: logged with its stable event name (alert rules match it) and queued.
    Logged before it is queued, so that an alert whose queue is down is still seen; or, with
    ``logged_once_queued``, after (the outbox tries again until it is queued: logging each try
    would fire the alert rules once per try)."""
    alert = OperatorAlert.model_validate(
        {"Event": event, "OrderID": order_id, "Reason": reason[:2000], "At": now}
    )
    if not logged_once_queued:
        _log_alert(event, order_id, reason)
    sender.send(
        queue,
        alert.model_dump_json(),
        message_id=f"{event}:{dedup_key or order_id or now.isoformat()}",
        correlation_id=order_id,
        properties={"Event": event},
    )
    if logged_once_queued:
        _log_alert(event, order_id, reason)


def _log_alert(event: str, order_id: str | None, reason: str) -> None:
    log.error("OPERATOR ALERT %s order=%s: %s", event, order_id, reason)
    telemetry.alerts.add(1, {"event": event})


def tell(ports: "Ports", stored: Stored, *, down: set[str] | None = None) -> Stored:
    """Deliver what ``stored``'s ending has still to tell, then clear from its outbox what went
    out (``domain.endings``); the record as stored after. A part that fails stays for the next
    teller: this one's repeat, or the Supervisor's sweep. Whoever tells, a part is the same
    message with the same MessageId and the same versioned write, so a part told twice (a crash
    between the telling and the clearing) takes effect once. ``down``: the dependencies a sweep
    already found unavailable, not tried again in it (and added to): one line per outage."""
    record = stored.record
    if record.Untold is None:
        return stored
    down = set() if down is None else down
    done: list[Part] = []
    for part in record.Untold.parts():
        if _DEPENDS_ON[part] in down:
            continue
        try:
            _deliver(ports, record, part)
        except DependencyUnavailable as outage:
            # Expected while a dependency is down (its outage was alerted once): one line.
            log.warning(
                "order %s is %s: its %s waits in its outbox: %s",
                record.OrderID,
                record.ProcessState.value,
                _PART_NAMES[part],
                outage,
            )
            down.add(_DEPENDS_ON[part])
            continue
        except Exception:
            log.exception(
                "order %s: could not tell its %s; it waits in its outbox", record.OrderID, _PART_NAMES[part]
            )
            continue
        done.append(part)
    return _cleared(ports, stored, done) if done else stored


_DEPENDS_ON = {Part.ORDERS_STATUS: ORDERS_DB, Part.STATUS: SERVICE_BUS, Part.ALERT: SERVICE_BUS}
_PART_NAMES = {
    Part.ORDERS_STATUS: "final status in the orders database",
    Part.STATUS: "final status to its app",
    Part.ALERT: "operator alert",
}


def _deliver(ports: "Ports", record: StateRecord, part: Part) -> None:
    untold = record.Untold
    assert untold is not None
    now = ports.clock.now()
    match part:
        case Part.ORDERS_STATUS:
            status = untold.OrdersStatus or ""
            # An order that ended because its row is missing has no row to tell.
            with contextlib.suppress(RecordNotFound):
                ports.orders.update_status(
                    record.OrderID, status, now, version=status_version(record.Attempt, status)
                )
        case Part.STATUS:
            assert untold.Status is not None
            post_status(
                ports.sender,
                queue=record.StatusQueue,
                order_id=record.OrderID,
                status=untold.Status,
                now=now,
                detail=record.LastError,
                # One per order and ending: a later ending of the same order (after an operator
                # moved it on) is a new message, a repeat of this one is dropped by the broker.
                message_id=f"{record.OrderID}:{record.Attempt}:{untold.Status.value}",
            )
        case Part.ALERT:
            raise_alert(
                ports.sender,
                queue=ports.settings.alerts_queue,
                event=untold.Alert or "",
                reason=f"order {record.OrderID} is {record.ProcessState.value}: "
                f"{record.LastError or 'no error'}",
                now=now,
                order_id=record.OrderID,
                dedup_key=f"{record.OrderID}:{record.Attempt}",
                logged_once_queued=True,
            )


def _cleared(ports: "Ports", stored: Stored, done: list[Part]) -> Stored:
    """Clear ``done`` from the outbox; the record as stored after. Told but not cleared (the
    store failed) is safe: the next teller tells again, and the copies take no effect."""
    try:
        return _clear(ports, stored, done)
    except DependencyUnavailable as outage:
        log.warning("order %s: told, but its outbox is not cleared yet: %s", stored.record.OrderID, outage)
    except Exception:
        log.exception("order %s: told, but could not clear its outbox", stored.record.OrderID)
    return stored


def _clear(ports: "Ports", stored: Stored, done: list[Part]) -> Stored:
    """A conditional write; a lost race reads again and clears what is still there."""
    ending = stored.record
    for _ in range(MAX_RACES):
        try:
            cleared = transitions.told(stored.record, of=ending, done=done, now=ports.clock.now())
        except IllegalTransition:
            break  # an operator moved the order on: the rest is moot
        if cleared is stored.record:
            break
        try:
            stored = ports.states.replace(cleared, stored.etag)
        except PreconditionFailed:
            stored = ports.states.get(ending.OrderID) or stored
            continue
        ports.records.remember(stored)
        break
    return stored
