"""The activities the order orchestrator calls. Every state write is fenced (E5).

Activities are at-least-once, so each is safe to repeat: a transition that was already applied
is either a no-op (complete_step, compensation log appends) or recognised by the attempt
number and state (finish), and every message it sends has a stable MessageId.
"""

import logging
from datetime import datetime
from typing import Any

from activities.contracts import (
    AgentRequestInput,
    AttemptInput,
    BeginStepResult,
    CompensationJson,
    FencedResult,
    FinishInput,
    FinishResult,
    LocalStepInput,
    LocalStepResult,
    OrderJson,
    ReadOrderResult,
    RecordStepInput,
    StepInput,
)
from activities.ids import Attempt
from domain import transitions
from domain.errors import RetryBudgetExhausted
from domain.ids import idempotency_key, request_message_id
from domain.messages import AgentRequest, OrderStatus
from domain.ports import CompensationEntry, CompensationOutcome, OrderRow, Stored, status_version
from domain.record import StateRecord
from domain.states import LOCKED_STATES, ProcessState
from domain.workflow import WORKFLOWS, Workflow
from services.context import Ports
from services.fenced import fenced_update
from services.notifications import announce

log = logging.getLogger("sas.activities")

# C5: the compensation log keeps references to remote effects, never personal or card data.
_REFERENCE_SUFFIX = "Id"


def _workflow(record: StateRecord) -> Workflow:
    return WORKFLOWS[record.WorkflowVersion]


def _order_json(order: OrderRow) -> OrderJson:
    return {
        "OrderID": order.OrderID,
        "Customer": order.Customer,
        "Total": str(order.Total),
        "Lines": [
            {"Sku": line.Sku, "Quantity": line.Quantity, "UnitPrice": str(line.UnitPrice)}
            for line in order.Lines
        ],
    }


def _to_compensate(ports: Ports, record: StateRecord) -> list[CompensationJson]:
    """What is still to undo, newest first (R9): every logged step the record has not marked
    undone. The log says what may need undoing; the fenced record says what has been undone."""
    return [
        {"Step": e.Step, "Action": e.Action, "Data": e.Data}
        for e in ports.compensation_log.entries(record.OrderID)
        if e.Step not in record.CompensatedSteps
    ]


def _owned(ports: Ports, attempt: Attempt) -> Stored | None:
    """The record while this attempt holds it, from this process's copy when that says so;
    otherwise (no copy, or one that may be stale) from a read. None: fenced out."""
    stored = ports.records.recall(attempt.order_id)
    if stored is None or stored.record.LockedBy != attempt.instance_id:
        stored = ports.states.get(attempt.order_id)
        if stored is not None:
            ports.records.remember(stored)
    if stored is None or stored.record.LockedBy != attempt.instance_id:
        return None
    return stored


def read_order(payload: AttemptInput, ports: Ports) -> ReadOrderResult:
    """The attempt's starting point (E7): the order from SQL and where the record stands. Always
    a fresh read: what the attempt does next is decided from it."""
    attempt = Attempt.of(payload)
    stored = ports.states.get(attempt.order_id)
    if stored is not None:
        ports.records.remember(stored)
    if stored is None or stored.record.LockedBy != attempt.instance_id:
        return {"Fenced": True}
    record = stored.record
    order = ports.orders.get(attempt.order_id)
    if order is None:
        return {"Fenced": False, "Missing": True}
    compensating = record.ProcessState is ProcessState.COMPENSATING
    return {
        "Fenced": False,
        "Missing": False,
        "Compensating": compensating,
        "CompletedSteps": list(record.CompletedSteps),
        "ToCompensate": _to_compensate(ports, record) if compensating else [],
        "Order": _order_json(order),
    }


def begin_step(payload: StepInput, ports: Ports) -> BeginStepResult:
    """The step's own CompleteBy and its share of the retry budget (R1, C2)."""
    attempt = Attempt.of(payload)
    step = str(payload["Step"])
    settings = ports.settings
    granted: list[int] = []

    def begin(record: StateRecord) -> StateRecord:
        started = transitions.begin_step(
            record,
            instance=attempt.instance_id,
            step=step,
            now=ports.clock.now(),
            policy=settings.scheduler_policy,
            calls_wanted=settings.calls_per_step_attempt,
        )
        granted.append(started.calls_granted)
        return started.record

    try:
        record = fenced_update(ports.states, attempt.order_id, begin, cache=ports.records)
    except RetryBudgetExhausted as exhausted:
        return {"Fenced": False, "Exhausted": True, "Error": str(exhausted)}
    if record is None or record.CompleteBy is None:
        return {"Fenced": True}
    # Each delivery of the request may make this many calls; deliveries x calls <= the grant (C2).
    per_delivery = granted[-1] // settings.agent_request_max_deliveries
    if per_delivery == 0:
        return {"Fenced": False, "Exhausted": True, "Error": f"{step}: the retry budget is spent"}
    return {
        "Fenced": False,
        "Exhausted": False,
        "CompleteBy": record.CompleteBy.isoformat(),
        "CallsGranted": per_delivery,
    }


def send_agent_request(payload: AgentRequestInput, ports: Ports) -> str:
    """The request to the Agent (R2). MessageId is stable across re-sends of this attempt (E9)."""
    attempt = Attempt.of(payload)
    action = str(payload["Action"])
    request_id = request_message_id(attempt.instance_id, action)
    request = AgentRequest(
        RequestID=request_id,
        InstanceID=attempt.instance_id,
        OrderID=attempt.order_id,
        Step=action,
        IdempotencyKey=idempotency_key(attempt.order_id, action),
        Payload=dict(payload.get("Payload") or {}),
        CompleteBy=datetime.fromisoformat(str(payload["CompleteBy"])),
        MaxAttempts=int(payload["MaxAttempts"]),
    )
    ports.sender.send(
        ports.settings.agent_requests_queue,
        request.model_dump_json(),
        message_id=request_id,
        correlation_id=attempt.order_id,
    )
    return request_id


def record_step(payload: RecordStepInput, ports: Ports, stored: Stored | None = None) -> FencedResult:
    """A step (or its compensation) is done: log how to undo it first, then mark it (R9)."""
    attempt = Attempt.of(payload)
    step = str(payload["Step"])
    stored = stored or _owned(ports, attempt)
    if stored is None:
        return {"Fenced": True}
    workflow = _workflow(stored.record)
    now = ports.clock.now()
    if stored.record.ProcessState is ProcessState.PROCESSING:
        compensation = workflow.step(step).compensation
        if compensation is not None:
            result = payload.get("Result") or {}
            references = {
                str(k): str(v)
                for k, v in result.items()
                if str(k).endswith(_REFERENCE_SUFFIX) and isinstance(v, str | int)
            }
            ports.compensation_log.append(
                CompensationEntry(
                    OrderID=attempt.order_id,
                    Sequence=workflow.sequence(step),
                    Step=step,
                    Action=compensation,
                    Data=references,
                    RecordedAt=now,
                )
            )
    record = fenced_update(
        ports.states,
        attempt.order_id,
        lambda r: transitions.complete_step(
            r, instance=attempt.instance_id, step=step, now=now, policy=ports.settings.scheduler_policy
        ),
        snapshot=stored,
        cache=ports.records,
    )
    if record is None:
        return {"Fenced": True}
    if record.ProcessState is ProcessState.COMPENSATING:
        # After the fenced write: a fenced-out attempt must not mark anything undone.
        ports.compensation_log.record_outcome(attempt.order_id, step, CompensationOutcome.COMPENSATED, now)
    return {"Fenced": False}


def run_local_step(payload: LocalStepInput, ports: Ports) -> LocalStepResult:
    """A step that runs in the Function App itself; each is idempotent (R8, C10)."""
    attempt = Attempt.of(payload)
    action = str(payload["Action"])
    stored = _owned(ports, attempt)
    if stored is None:
        return {"Fenced": True}
    order = payload.get("Order") or {}
    if action == "ValidateOrder":
        problem = _validation_problem(order)
        if problem is not None:
            return {"Fenced": False, "Error": f"ValidateOrder: {problem}"}
    elif action == "ConfirmOrder":
        problem = _confirmation_problem(order)
        if problem is not None:
            return {"Fenced": False, "Error": f"ConfirmOrder: {problem}"}
        _set_status(ports, stored.record, "Confirmed")
    elif action == "ShipOrder":
        _set_status(ports, stored.record, "Shipped")
    else:
        return {"Fenced": False, "Error": f"no local action {action!r}"}
    return {"Fenced": record_step(payload, ports, stored)["Fenced"]}


def _set_status(ports: Ports, record: StateRecord, status: str) -> None:
    # Versioned by the attempt that read the record: if a newer attempt, or the Supervisor's
    # give-up, has written since, this stale write changes nothing.
    version = status_version(record.Attempt, status)
    ports.orders.update_status(record.OrderID, status, ports.clock.now(), version=version)


def _skus(order: dict[str, Any], prefix: str) -> list[str]:
    return [str(line["Sku"]) for line in order.get("Lines", []) if str(line["Sku"]).startswith(prefix)]


# The demo's business rules. BLOCKED-* fails the first step (nothing to undo); BACKORDER-* fails
# the last one, after inventory and payment: both are undone, newest first.
def _validation_problem(order: dict[str, Any]) -> str | None:
    blocked = _skus(order, "BLOCKED")
    return f"SKU(s) {', '.join(blocked)} may not be sold" if blocked else None


def _confirmation_problem(order: dict[str, Any]) -> str | None:
    backordered = _skus(order, "BACKORDER")
    return f"SKU(s) {', '.join(backordered)} cannot be shipped" if backordered else None


# The terminal moves of an attempt: target state, status for the submitter, alert, SQL status.
_FINISH: dict[str, tuple[ProcessState, OrderStatus | None, str | None, str | None]] = {
    "complete": (ProcessState.PROCESSED, OrderStatus.COMPLETED, None, None),
    "fail": (ProcessState.ERROR, OrderStatus.FAILED, "OrderFailed", "Failed"),
    "begin_compensation": (ProcessState.COMPENSATING, None, None, None),
    "compensated": (ProcessState.COMPENSATED, OrderStatus.COMPENSATED, "OrderCompensated", "Cancelled"),
    "compensation_failed": (
        ProcessState.COMPENSATION_FAILED,
        OrderStatus.COMPENSATION_FAILED,
        "CompensationFailed",
        "CompensationFailed",
    ),
}


def finish(payload: FinishInput, ports: Ports) -> FinishResult:
    """Complete, fail, or move through compensation; then tell the submitter and the operator."""
    attempt = Attempt.of(payload)
    outcome = str(payload["Outcome"])
    error = str(payload.get("Error") or "")
    if outcome == "fail" and ports.compensation_log.entries(attempt.order_id):
        # The log, not the orchestration's memory, says whether anything may need undoing: a
        # step whose effect landed but whose reply did not is logged too (R9, C10).
        outcome = "begin_compensation"
    target, status, alert, sql_status = _FINISH[outcome]
    now = ports.clock.now()
    instance = attempt.instance_id
    policy = ports.settings.scheduler_policy

    def move(record: StateRecord) -> StateRecord:
        undoable = {s.name for s in _workflow(record).steps if s.compensation}
        repeated = record.ProcessState is ProcessState.COMPENSATING and record.LockedBy == instance
        if outcome == "begin_compensation" and repeated:
            return record  # a repeat of this very move: nothing to change
        match outcome:
            case "complete":
                return transitions.complete(record, instance=instance, now=now)
            case "fail":
                return transitions.fail(record, instance=instance, now=now, error=error)
            case "begin_compensation":
                return transitions.begin_compensation(
                    record, instance=instance, now=now, policy=policy, error=error
                )
            case "compensated":
                return transitions.compensated(record, instance=instance, now=now, undoable=undoable)
            case _:
                return transitions.compensation_failed(record, instance=instance, now=now, error=error)

    record = fenced_update(ports.states, attempt.order_id, move, cache=ports.records)
    if record is None:
        # A repeat of this activity after its write landed: the record shows it; notify again.
        stored = ports.states.get(attempt.order_id)
        if stored is None or not _already_finished(stored.record, attempt, target):
            return {"Fenced": True}
        record = stored.record
    announce(ports, record, status=status, alert=alert, sql_status=sql_status)
    result: FinishResult = {"Fenced": False, "State": record.ProcessState.value}
    if outcome == "begin_compensation":
        result["ToCompensate"] = _to_compensate(ports, record)
    return result


def _already_finished(record: StateRecord, attempt: Attempt, target: ProcessState) -> bool:
    if record.Attempt != attempt.number or record.ProcessState is not target:
        return False
    # Compensating stays locked by the same instance; terminal states are unlocked.
    return record.ProcessState not in LOCKED_STATES or record.LockedBy == attempt.instance_id
