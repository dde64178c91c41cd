"""Status messages to the submitting app's own queue (E16) and operator alerts (E12, C11).

Both are sent with MessageIds derived from what they report, so a repeat of the activity that
sends them (activities are at-least-once) is dropped by duplicate detection.
"""

import logging
from datetime import datetime
from typing import TYPE_CHECKING

from domain.messages import OperatorAlert, OrderStatus, StatusMessage
from domain.order_status import status_version
from domain.ports import MessageSender
from domain.record import StateRecord
from domain.states import ProcessState
from services import telemetry

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
) -> None:
    """An operator alert: logged with its stable event name (alert rules match it) and queued."""
    alert = OperatorAlert.model_validate(
        {"Event": event, "OrderID": order_id, "Reason": reason[:2000], "At": now}
    )
    log.error("OPERATOR ALERT %s order=%s: %s", event, order_id, reason)
    telemetry.alerts.add(1, {"event": event})
    sender.send(
        queue,
        alert.model_dump_json(),
        message_id=f"{event}:{dedup_key or order_id or now.isoformat()}",
        correlation_id=order_id,
        properties={"Event": event},
    )


def announce(
    ports: "Ports",
    record: StateRecord,
    *,
    status: OrderStatus | None,
    alert: str | None,
    sql_status: str | None,
) -> None:
    """Tell everyone who must hear that an order reached ``record``'s state: the orders database,
    the submitter's own status queue (E16) and, when it needs a person, an operator (C11)."""
    now = ports.clock.now()
    if sql_status is not None:
        ports.orders.update_status(
            record.OrderID, sql_status, now, version=status_version(record.Attempt, sql_status)
        )
    if status is not None:
        post_status(
            ports.sender,
            queue=record.StatusQueue,
            order_id=record.OrderID,
            status=status,
            now=now,
            detail=record.LastError,
        )
    if alert is not None:
        raise_alert(
            ports.sender,
            queue=ports.settings.alerts_queue,
            event=alert,
            reason=f"order {record.OrderID} is {record.ProcessState.value}: {record.LastError or 'no error'}",
            now=now,
            order_id=record.OrderID,
            dedup_key=f"{record.OrderID}:{record.Attempt}",
        )


def notify_gave_up(ports: "Ports", record: StateRecord) -> None:
    """The Supervisor gave up on a record: tell its submitter and an operator (E15, C8)."""
    compensation = record.ProcessState is ProcessState.COMPENSATION_FAILED
    announce(
        ports,
        record,
        status=OrderStatus.COMPENSATION_FAILED if compensation else OrderStatus.FAILED,
        alert="RecoveryGaveUp",
        sql_status="CompensationFailed" if compensation else "Failed",
    )
