"""The web front end (E1, C3): accept an order onto the orders queue, or push back; show one order.

Every request is made by a registered submitting app, known from the Entra application token it
sends (``adapters.entra_tokens`` verifies it, ``domain.apps`` says whose it is): the app decides
nothing by what it sends in the body.
An app submits for itself, hears back on its own status queue and sees only its own orders.

Backpressure is visible to the submitter: while the backlog (the orders queue's active messages
plus the Pending records, ``services.admission``) passes the threshold, new submissions get 429
with a Retry-After instead of silently growing the queue: the time until the front end reads the
backlog again and the measured drain has made room for the caller, room then kept for it.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from domain import transitions
from domain.admission import Backlog
from domain.apps import NotAuthenticated, NotPermitted, NotRegistered, SubmittingApp, authorised_app
from domain.errors import DependencyUnavailable
from domain.messages import InvalidMessage, OrderSubmission, QueuedOrder, parse_message
from domain.record import START_STEP
from domain.states import ProcessState
from services.admission import Refusal
from services.context import Ports
from services.submit_order import conflict_detail


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _error(status: int, error: str, detail: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status, {"error": error, "detail": detail}, headers or {})


def internal_error() -> Reply:
    """500 for what nobody foresaw: no stack or internal name goes to the caller, only the
    invocation ID (``with_invocation``) under which the log holds them."""
    return _error(500, "InternalError", "the request failed; quote its invocationId to the operator")


def with_invocation(reply: Reply, invocation_id: str) -> Reply:
    """An error body with the invocation ID that the host's logs and traces carry."""
    if reply.status < 400:
        return reply
    return Reply(reply.status, {**reply.body, "invocationId": invocation_id}, reply.headers)


def caller(headers: Mapping[str, str], ports: Ports) -> SubmittingApp | Reply:
    """The registered app making this request, from its verified application token
    (``Authorization: Bearer``), or the reply that refuses it. No header but that one says who
    calls. Raises ``DependencyUnavailable`` while the issuer's signing keys cannot be read."""
    if ports.tokens is None:
        return _error(
            503, "AuthenticationNotConfigured", "the token validator is not configured: requests are refused"
        )
    scheme, _, token = _header(headers, "authorization").strip().partition(" ")
    try:
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticated("send an Entra access token: Authorization: Bearer <token>")
        return authorised_app(ports.tokens.claims(token.strip()), ports.settings.submitters)
    except NotAuthenticated as error:
        return _error(
            401, "NotAuthenticated", str(error), {"WWW-Authenticate": 'Bearer error="invalid_token"'}
        )
    except NotPermitted as error:
        return _error(
            403, "NotRegistered" if isinstance(error, NotRegistered) else "NotPermitted", str(error)
        )


def _header(headers: Mapping[str, str], name: str) -> str:
    return next((v for k, v in headers.items() if k.lower() == name), "")


def accept_order(body: bytes, headers: Mapping[str, str], ports: Ports, base_url: str = "/api") -> Reply:
    app = caller(headers, ports)
    if isinstance(app, Reply):
        return app
    try:
        order = parse_message(OrderSubmission, body)
    except InvalidMessage as invalid:
        return _error(400, invalid.reason, invalid.description)
    if order.StatusQueue not in (None, app.status_queue):
        return _error(
            403, "SubmissionRejected", f"StatusQueue {order.StatusQueue!r} is not {app.name}'s status queue"
        )
    queued = QueuedOrder.model_validate(
        {**order.model_dump(exclude={"StatusQueue"}), "SubmittedBy": app.name}
    )
    # One point read answers a conflict now, while the caller waits, instead of in a dead letter.
    stored = ports.states.get(order.OrderID)
    if stored is not None and stored.record.OrderHash != queued.order_hash():
        return conflict(order.OrderID)
    # A record held for its order row (the orders database was down) is queued again: if its
    # postponed copies ran out, this repeat is what brings it in; if not, it is one more
    # idempotent copy.
    if stored is None or transitions.is_awaiting_order_row(stored.record):
        backlog = _backlog(order.OrderID, ports)
        if backlog is not None:
            return backlog
        # The MessageId names the order's content: a repeat is dropped by duplicate detection, a
        # conflicting order is not, and the submission function refuses it (racing posts).
        ports.sender.send(
            ports.settings.orders_queue,
            queued.model_dump_json(),
            message_id=queued.message_id(),
            correlation_id=order.OrderID,
        )
        if ports.admission is not None:
            ports.admission.admitted(order.OrderID)
    status_url = f"{base_url}/orders/{order.OrderID}"
    return Reply(202, {"OrderID": order.OrderID, "statusUrl": status_url}, {"Location": status_url})


def conflict(order_id: str) -> Reply:
    return _error(409, "OrderConflict", conflict_detail(order_id))


def unavailable(outage: DependencyUnavailable, ports: Ports) -> Reply:
    """503 with Retry-After: a store or the bus stayed down for a whole retry budget. Nothing was
    accepted, so the caller's retry is safe (the submission is idempotent by OrderID)."""
    retry_after = str(ports.settings.backlog_retry_after_seconds)
    return _error(503, "ServiceUnavailable", str(outage), {"Retry-After": retry_after})


def _backlog(order_id: str, ports: Ports) -> Reply | None:
    """429 with Retry-After while too many orders wait: queued or Pending (C3)."""
    refusal = _refusal(order_id, ports)
    if refusal is None:
        return None
    backlog, retry_after = refusal.backlog, refusal.retry_after
    waiting = f"{backlog.total} orders are waiting ({backlog.queued} queued, {backlog.pending} pending)"
    if refusal.promised:
        waiting += f", and room is kept for callers told to come back before you: {refusal.promised}"
    detail = f"{waiting}; try again in {retry_after}s"
    return _error(429, "Backlog", detail, {"Retry-After": str(retry_after)})


def _refusal(order_id: str, ports: Ports) -> Refusal | None:
    settings = ports.settings
    threshold, fallback = settings.backlog_threshold, settings.backlog_retry_after_seconds
    if ports.admission is not None:
        return ports.admission.refusal(order_id, threshold, fallback)
    pending = ports.states.count_in_states(frozenset({ProcessState.PENDING}))
    return None if pending < threshold else Refusal(Backlog(0, pending), 0, fallback)


def order_view(order_id: str, headers: Mapping[str, str], ports: Ports) -> Reply:
    """The caller's own order. Another app's order is answered exactly like a missing one, so
    order IDs do not leak between apps."""
    app = caller(headers, ports)
    if isinstance(app, Reply):
        return app
    return record_view(order_id, ports, owner=app)


def record_view(
    order_id: str, ports: Ports, *, owner: SubmittingApp | None, before_first_step: str | None = None
) -> Reply:
    """An order as a submitter (``owner``: its own orders only) or an operator (``None``) may
    see it: no locks, tokens or hashes. ``before_first_step``: what ``FailedStep`` says of an order
    that failed before any step (the record's "$start" is a storage detail)."""
    stored = ports.states.get(order_id)
    if stored is None or (owner is not None and stored.record.StatusQueue != owner.status_queue):
        return _error(404, "NotFound", f"no order {order_id!r}")
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
            "FailedStep": before_first_step if record.FailedStep == START_STEP else record.FailedStep,
            "LastError": record.LastError,
            # A record held for its order row has no time to name: it waits on the database.
            "NotBefore": None
            if record.NotBefore is None or transitions.is_awaiting_order_row(record)
            else record.NotBefore.isoformat(),
            # Why it waits, if it does: the dependency its attempt met down, and how often an
            # outage ended an attempt uncounted (docs/operating.md "What an outage costs").
            "Unavailable": record.Unavailable,
            "OutageHolds": record.OutageHolds,
            "UpdatedAt": record.UpdatedAt.isoformat(),
        },
    )
