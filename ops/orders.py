"""Orders: submit one, follow one (``status``, ``show``), list and count them, and the two moves
an operator makes on an Error order (``resubmit``, ``compensate``)."""

import json
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from domain.dependencies import COMPENSATION_LOG, ORDERS_DB
from domain.endings import Part
from domain.errors import DependencyUnavailable, IllegalTransition, RecordNotFound
from domain.record import START_STEP, StateRecord
from domain.states import ProcessState
from ops import function_failures, outage_view, queues
from ops.apps import registered
from ops.errors import Refused
from ops.output import Output, iso
from ops.tokens import app_token
from services import frontend, operator
from services.context import Ports

# Where an order is posted: the front end's checks, given the body and the request's headers.
FrontEnd = Callable[[bytes, Mapping[str, str]], frontend.Reply]


def local_front_end(ports: Ports) -> FrontEnd:
    """The front end's own code on these ports, as ``POST /api/orders`` runs it."""
    return lambda body, headers: frontend.accept_order(body, headers, ports)


def order_body(order_id: str, sku: str, quantity: int) -> bytes:
    price = Decimal("12.50")
    # Built as plain JSON, not as the model, so that the front end's validation judges it.
    order = {
        "OrderID": order_id,
        "Customer": "Operator",
        "Lines": [{"Sku": sku, "Quantity": quantity, "UnitPrice": float(price)}],
        "Total": float(price * quantity),
        "SubmittedAt": datetime.now(UTC).isoformat(),
    }
    return json.dumps(order).encode()


def post_order(front_end: FrontEnd, token: str, body: bytes) -> dict[str, Any]:
    """The order posted with the app's token: the front end's answer, refused unless accepted."""
    reply = front_end(body, {"Authorization": f"Bearer {token}"})
    if reply.status != 202:
        raise Refused(f"{reply.body.get('error')}: {reply.body.get('detail')}")
    return reply.body


def submit(ports: Ports, out: Output, order_id: str, *, app: str, sku: str, quantity: int) -> None:
    # The operator submits on behalf of a registered app, with the token that app would send.
    token = app_token(ports.settings, registered(ports.settings, app).name)
    accepted = post_order(local_front_end(ports), token, order_body(order_id, sku, quantity))
    out.show("Submitted", [accepted], ["OrderID", "statusUrl"])


def status(ports: Ports, out: Output, order_id: str) -> None:
    reply = frontend.record_view(order_id, ports, owner=None, before_first_step=step_name(START_STEP))
    if reply.status == 404:
        raise Refused(f"no order {order_id!r}")
    out.show_fields(f"Order {order_id}", reply.body)
    function_failures.report(out)


def step_name(step: str | None) -> str | None:
    """A step as the operator knows it: the record's marker for "before any step" in words."""
    return "(before the first step)" if step == START_STEP else step


def _progress(record: StateRecord) -> str:
    """Where the order stands, from its state record: state, attempt, steps, failures."""
    parts = [
        f"{record.ProcessState.value}, attempt {record.Attempt}, {record.FailureCount} failure(s)",
        f"steps done: {', '.join(record.CompletedSteps) or 'none'}",
    ]
    if record.CurrentStep:
        parts.append(f"current step {record.CurrentStep}")
    if record.StepFailures:
        parts.append("step failures " + ", ".join(f"{k}={v}" for k, v in record.StepFailures.items()))
    if record.FailedStep:
        parts.append(f"failed step {step_name(record.FailedStep)}")
    if record.CompensatedSteps:
        parts.append(f"compensated: {', '.join(record.CompensatedSteps)}")
    if record.LastError:
        parts.append(f"last error: {record.LastError}")
    if record.Unavailable:
        parts.append(f"waiting on the {record.Unavailable}")
    if record.OutageHolds:
        parts.append(f"held {record.OutageHolds} time(s) for outages, uncounted")
    if record.Untold:
        told = {Part.ORDERS_STATUS: "its orders row", Part.STATUS: "its app", Part.ALERT: "an operator"}
        untold = ", ".join(told[part] for part in record.Untold.parts())
        parts.append(f"its ending not yet told to {untold} (the Supervisor's sweep tells it)")
    if record.NotBefore:
        parts.append(f"not before {iso(record.NotBefore)}")
    return "; ".join(parts)


def timeline(ports: Ports, out: Output, order_id: str, browser: queues.QueueBrowser | None = None) -> None:
    """What every store holds of the order, in time order: the state record, the orders row,
    the compensation log, and the status messages and alerts still on their queues (``browser``:
    the profile's bus unless given). An orders database or a queue that cannot be read is one
    line of the timeline ("not read: why"), not the end of it."""
    events: list[dict[str, Any]] = []

    def event(at: datetime | str | None, source: str, what: str) -> None:
        events.append({"At": iso(at), "Source": source, "Event": what})

    stored = ports.states.get(order_id)
    try:
        row = ports.orders.get(order_id)
    except DependencyUnavailable as unread:
        row = None
        event(None, ORDERS_DB, f"not read: {unread.detail}")
    if stored is None and row is None:
        raise Refused(f"no order {order_id!r}")
    if row is not None:
        event(row.CreatedAt, ORDERS_DB, f"received: {len(row.Lines)} line(s), total {row.Total}")
        event(row.UpdatedAt, ORDERS_DB, f"status {row.Status}")
    if stored is not None:
        record = stored.record
        event(record.CreatedAt, "state record", "created (Pending)")
        event(record.UpdatedAt, "state record", _progress(record))
    for entry in ports.compensation_log.entries(order_id):
        event(entry.RecordedAt, COMPENSATION_LOG, f"{entry.Step} done: undo with {entry.Action}")
        if entry.Outcome is not None:
            outcome = f"{entry.Action}: {entry.Outcome}" + (f" ({entry.Error})" if entry.Error else "")
            event(entry.OutcomeAt, COMPENSATION_LOG, outcome)
    browser = browser or queues.browser(ports)

    def bodies(name: str) -> list[dict[str, Any]]:
        try:
            return queues.bodies(browser, name, order_id)
        except Refused as refused:  # e.g. an operator with no role on another app's status queue
            event(None, name, f"not read: {refused}")
            return []

    queue = row.StatusQueue if row is not None else stored.record.StatusQueue if stored else None
    for name in filter(None, [queue]):
        for body in bodies(name):
            detail = f": {body['Detail']}" if body.get("Detail") else ""
            event(body.get("At"), name, f"status {body.get('Status')}{detail}")
    alerts = ports.settings.alerts_queue
    for body in bodies(alerts):
        event(body.get("At"), alerts, f"{body.get('Event')}: {body.get('Reason')}")
    events.sort(key=lambda e: e["At"])
    out.show(f"Order {order_id}", events, ["At", "Source", "Event"])


def list_orders(ports: Ports, out: Output, state: str | None, limit: int) -> None:
    states = [ProcessState(state)] if state else list(ProcessState)
    rows = [
        {
            "OrderID": s.record.OrderID,
            "ProcessState": s.record.ProcessState.value,
            "Attempt": s.record.Attempt,
            "FailureCount": s.record.FailureCount,
            "FailedStep": s.record.FailedStep,
            "LastError": (s.record.LastError or "")[:60],
        }
        for one in states
        for s in ports.states.query_in_state(one, limit)
    ][:limit]
    out.show(f"Orders{f' in {state}' if state else ''}", rows, list(rows[0]) if rows else ["OrderID"])


def counts(ports: Ports) -> list[dict[str, Any]]:
    return [
        {"ProcessState": s.value, "orders": ports.states.count_in_states(frozenset({s}))}
        for s in ProcessState
    ]


WAITING_LIMIT = 1000  # records read per state to count what waits on a dependency


def waiting(ports: Ports) -> list[dict[str, Any]]:
    """Orders waiting on each dependency (``ops.outage_view``, as the local page shows)."""
    found = outage_view.waiting_on(ports.states, WAITING_LIMIT)
    # More records than were read: the count is a floor, and the row says so.
    floor = "" if found.complete else f" (at least: {WAITING_LIMIT} read per state)"
    return [{"Unavailable": f"{d}{floor}", "orders": n} for d, n in found.by_dependency.items()]


def watch(ports: Ports, out: Output, interval: float, once: bool) -> None:
    """Orders per state, then a row for each dependency orders wait on (none when all is well)."""
    pause = threading.Event()
    while True:
        rows = counts(ports) + waiting(ports)
        out.show(f"Orders at {datetime.now(UTC):%H:%M:%S}", rows, ["ProcessState", "Unavailable", "orders"])
        function_failures.report(out)
        if once or pause.wait(interval):
            return


def move(ports: Ports, out: Output, order_id: str, action: str) -> None:
    """``resubmit`` (E12: an Error order back to Pending) or ``compensate`` (undo it)."""
    moved = operator.resubmit if action == "resubmit" else operator.request_compensation
    try:
        record = moved(ports.states, ports.clock, order_id)
    except RecordNotFound:
        raise Refused(f"no order {order_id!r}") from None
    except IllegalTransition:
        # In the operator's words, not the state machine's (its move names are for the logs).
        stored = ports.states.get(order_id)
        state = stored.record.ProcessState.value if stored else "gone"
        allowed, done = (
            ("Error", "resubmitted")
            if action == "resubmit"
            else ("Error or CompensationFailed", "compensated")
        )
        raise Refused(f"{order_id} is {state}: only an order in {allowed} can be {done}") from None
    out.show(
        f"{action}: {order_id}",
        [
            {
                "OrderID": order_id,
                "ProcessState": record.ProcessState.value,
                "CompensationRequested": record.CompensationRequested,
            }
        ],
        ["OrderID", "ProcessState", "CompensationRequested"],
    )
