"""The web front end (E1, C3): accept an order onto the orders queue, or push back; show one order.

Backpressure is visible to the submitter: while the backlog of Pending orders passes the
threshold, new submissions get 429 with Retry-After instead of silently growing the store.
"""

from dataclasses import dataclass, field
from typing import Any

from domain.messages import InvalidMessage, OrderSubmission, parse_message
from domain.states import ProcessState
from services.context import Ports


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def accept_order(body: bytes, ports: Ports, base_url: str = "/api") -> Reply:
    try:
        order = parse_message(OrderSubmission, body)
    except InvalidMessage as invalid:
        return Reply(400, {"error": invalid.reason, "detail": invalid.description})
    settings = ports.settings
    if order.StatusQueue not in settings.status_queues:
        return Reply(
            400, {"error": "SubmissionRejected", "detail": f"unknown StatusQueue {order.StatusQueue!r}"}
        )
    backlog = ports.states.count_in_states(frozenset({ProcessState.PENDING}))
    if backlog >= settings.backlog_threshold:
        retry_after = str(settings.backlog_retry_after_seconds)
        return Reply(
            429,
            {"error": "Backlog", "detail": f"{backlog} orders are waiting; try again in {retry_after}s"},
            {"Retry-After": retry_after},
        )
    # MessageId = OrderID: a client that re-posts within the window is de-duplicated by the broker.
    ports.sender.send(
        settings.orders_queue, order.model_dump_json(), message_id=order.OrderID, correlation_id=order.OrderID
    )
    status_url = f"{base_url}/orders/{order.OrderID}"
    return Reply(202, {"OrderID": order.OrderID, "statusUrl": status_url}, {"Location": status_url})


def order_view(order_id: str, ports: Ports) -> Reply:
    """The state record as an operator or submitter may see it: no locks, tokens or hashes."""
    stored = ports.states.get(order_id)
    if stored is None:
        return Reply(404, {"error": "NotFound", "detail": f"no order {order_id!r}"})
    record = stored.record
    return Reply(
        200,
        {
            "OrderID": record.OrderID,
            "ProcessState": record.ProcessState.value,
            "Attempt": record.Attempt,
            "FailureCount": record.FailureCount,
            "WorkflowVersion": record.WorkflowVersion,
            "CompletedSteps": list(record.CompletedSteps),
            "CompensatedSteps": list(record.CompensatedSteps),
            "CurrentStep": record.CurrentStep,
            "FailedStep": record.FailedStep,
            "LastError": record.LastError,
            "NotBefore": None if record.NotBefore is None else record.NotBefore.isoformat(),
            "UpdatedAt": record.UpdatedAt.isoformat(),
        },
    )
