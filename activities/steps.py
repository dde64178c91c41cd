"""The step engine: the activities' bodies, typed (their JSON entry points: ``activities.functions``),
which run the record's workflow (what a workflow is: ``domain.workflow``, the workflow model).
Every state write is fenced (E5).

Activities are at-least-once, so each is safe to repeat: a transition that was already applied
is either a no-op (complete_step, compensation log appends) or recognised by the attempt
number and state (finish), and every message it sends has a stable MessageId.

Generic over workflows: the steps of the record's version, and what its local actions do, come
from ``domain.sample_workflow``.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from activities.ids import Attempt
from contracts.activities import (
    AdvanceInput,
    AdvanceResult,
    AgentRequestInput,
    AttemptInput,
    BeginStepResult,
    Compensation,
    FencedResult,
    FinishInput,
    FinishOutcome,
    FinishResult,
    LocalStepInput,
    LocalStepResult,
    OrderLineSnapshot,
    OrderSnapshot,
    PendingRequest,
    ReadOrderResult,
    RecordStepInput,
    StepInput,
)
from domain import transitions
from domain.compensation import CompensationEntry, CompensationOutcome
from domain.errors import RetryBudgetExhausted
from domain.ids import idempotency_key, request_id, request_message_id
from domain.messages import AgentOutcome, AgentRequest
from domain.order_status import status_version
from domain.ports import OrderRow, Stored
from domain.record import StateRecord
from domain.sample_workflow import WORKFLOWS
from domain.states import LOCKED_STATES, ProcessState
from domain.workflow import Ending, Runs, Workflow
from services.context import Ports
from services.fenced import fenced_update, fenced_write
from services.notifications import tell

log = logging.getLogger("sas.activities")

# C5: the compensation log keeps references to remote effects, never personal or card data.
_REFERENCE_SUFFIX = "Id"
# In an undo's payload: the idempotency key of the forward call it undoes (a reference too).
UNDOES = "Undoes"


def _workflow(record: StateRecord) -> Workflow:
    return WORKFLOWS[record.WorkflowVersion]


def _snapshot(order: OrderRow) -> OrderSnapshot:
    return OrderSnapshot(
        OrderID=order.OrderID,
        Customer=order.Customer,
        Total=str(order.Total),
        Lines=[
            OrderLineSnapshot(Sku=line.Sku, Quantity=line.Quantity, UnitPrice=str(line.UnitPrice))
            for line in order.Lines
        ],
    )


def _to_compensate(ports: Ports, record: StateRecord) -> list[Compensation]:
    """What is still to undo, newest first (R9): every step whose request went out and that the
    record has not marked undone. The log holds the references a completed step's undo needs; a
    step that began but never completed (refused, ambiguous, or its reply late) has no entry and
    is undone by its idempotency key alone, since the remote may have acted on it (C10)."""
    logged = {e.Step: e for e in ports.compensation_log.entries(record.OrderID)}
    pending: list[Compensation] = []
    for step in reversed(_workflow(record).steps):
        if step.compensation is None or step.name in record.CompensatedSteps:
            continue
        # Every undo names the forward call it undoes, so the remote can tell an undo of nothing.
        undoes = {UNDOES: idempotency_key(record.OrderID, step.name)}
        entry = logged.get(step.name)
        if entry is not None:
            pending.append(Compensation(Step=entry.Step, Action=entry.Action, Data=entry.Data | undoes))
        elif transitions.went_out(record, step.name):
            pending.append(Compensation(Step=step.name, Action=step.compensation, Data=undoes))
    return pending


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


def _fresh(ports: Ports, attempt: Attempt) -> Stored | None:
    """The record read now (an attempt decides its start from a fresh read), or None: fenced out."""
    stored = ports.states.get(attempt.order_id)
    if stored is not None:
        ports.records.remember(stored)
    if stored is None or stored.record.LockedBy != attempt.instance_id:
        return None
    return stored


def read_order(work: AttemptInput, ports: Ports) -> ReadOrderResult:
    """The attempt's starting point (E7): the order from SQL and where the record stands. Always
    a fresh read: what the attempt does next is decided from it."""
    attempt = Attempt.of(work)
    stored = _fresh(ports, attempt)
    if stored is None:
        return ReadOrderResult(Fenced=True)
    record = stored.record
    order = ports.orders.get(attempt.order_id)
    if order is None:
        return ReadOrderResult(Fenced=False, Missing=True)
    ports.orders_read.put(order.OrderID, order)
    compensating = record.ProcessState is ProcessState.COMPENSATING
    return ReadOrderResult(
        Fenced=False,
        Missing=False,
        Compensating=compensating,
        CompletedSteps=list(record.CompletedSteps),
        ToCompensate=_to_compensate(ports, record) if compensating else [],
        Order=_snapshot(order),
    )


def begin_step(work: StepInput, ports: Ports) -> BeginStepResult:
    """The step's own CompleteBy and its share of the retry budget (R1, C2)."""
    attempt = Attempt.of(work)
    step = work.Step
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
        return BeginStepResult(Fenced=False, Exhausted=True, Error=str(exhausted))
    if record is None or record.CompleteBy is None:
        return BeginStepResult(Fenced=True)
    # Each delivery of the request may make this many calls; deliveries x calls <= the grant (C2).
    per_delivery = granted[-1] // settings.agent_request_max_deliveries
    if per_delivery == 0:
        return BeginStepResult(Fenced=False, Exhausted=True, Error=f"{step}: the retry budget is spent")
    return BeginStepResult(
        Fenced=False, Exhausted=False, CompleteBy=record.CompleteBy, CallsGranted=per_delivery
    )


def send_agent_request(work: AgentRequestInput, ports: Ports) -> str:
    """The request to the Agent (R2), and its RequestID. The RequestID carries the nonce the
    orchestration made for it, so only a reply to this very request names the event its wait
    listens for; without a nonce (a call from an older history) it is the legacy one. The
    MessageId does not depend on the nonce: it is stable across re-sends of this attempt (E9)."""
    attempt = Attempt.of(work)
    action = work.Action
    message_id = request_message_id(attempt.instance_id, action)
    rid = message_id if work.Nonce is None else request_id(action, work.Nonce)
    request = AgentRequest(
        RequestID=rid,
        InstanceID=attempt.instance_id,
        OrderID=attempt.order_id,
        Step=action,
        IdempotencyKey=idempotency_key(attempt.order_id, action),
        Payload=dict(work.Payload),
        CompleteBy=work.CompleteBy,
        MaxAttempts=work.MaxAttempts,
    )
    ports.sender.send(
        ports.settings.agent_requests_queue,
        request.model_dump_json(),
        message_id=message_id,
        correlation_id=attempt.order_id,
    )
    return rid


def _log_undo(
    ports: Ports, order_id: str, workflow: Workflow, step: str, *, references: dict[str, str], now: datetime
) -> None:
    """The compensation log's entry for how to undo ``step``, if it can be undone (R9)."""
    compensation = workflow.step(step).compensation
    if compensation is None:
        return
    ports.compensation_log.append(
        CompensationEntry(
            OrderID=order_id,
            Sequence=workflow.sequence(step),
            Step=step,
            Action=compensation,
            Data=references,
            RecordedAt=now,
        )
    )


def record_step(work: RecordStepInput, ports: Ports, stored: Stored | None = None) -> FencedResult:
    """A step (or its compensation) is done: log how to undo it first, then mark it (R9)."""
    attempt = Attempt.of(work)
    step = work.Step
    stored = stored or _owned(ports, attempt)
    if stored is None:
        return FencedResult(Fenced=True)
    workflow = _workflow(stored.record)
    now = ports.clock.now()
    if stored.record.ProcessState is ProcessState.PROCESSING:
        result = work.Result or {}
        references = {
            str(k): str(v)
            for k, v in result.items()
            if str(k).endswith(_REFERENCE_SUFFIX) and isinstance(v, str | int)
        }
        _log_undo(ports, attempt.order_id, workflow, step, references=references, now=now)
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
        return FencedResult(Fenced=True)
    if record.ProcessState is ProcessState.COMPENSATING:
        # After the fenced write: a fenced-out attempt must not mark anything undone.
        # A step undone because its request went out, never recorded done, has no entry yet:
        # the log gets one (no references: it has none), so it tells the whole story.
        _log_undo(ports, attempt.order_id, workflow, step, references={}, now=now)
        ports.compensation_log.record_outcome(attempt.order_id, step, CompensationOutcome.COMPENSATED, now)
    return FencedResult(Fenced=False)


def run_local_step(work: LocalStepInput, ports: Ports) -> LocalStepResult:
    """A step that runs in the Function App itself, as the record's workflow defines it; each is
    idempotent (R8, C10)."""
    attempt = Attempt.of(work)
    action = work.Action
    stored = _owned(ports, attempt)
    if stored is None:
        return LocalStepResult(Fenced=True)
    local = _workflow(stored.record).local_action(action)
    if local is None:
        return LocalStepResult(Fenced=False, Error=f"no local action {action!r}")
    problem = None if local.problem is None else local.problem(work.Order)
    if problem is not None:
        return LocalStepResult(Fenced=False, Error=f"{action}: {problem}")
    if local.status is not None:
        _set_status(ports, stored.record, local.status)
    return LocalStepResult(Fenced=record_step(work, ports, stored).Fenced)


def _set_status(ports: Ports, record: StateRecord, status: str) -> None:
    # Versioned by the attempt that read the record: if a newer attempt, or the Supervisor's
    # give-up, has written since, this stale write changes nothing.
    version = status_version(record.Attempt, status)
    ports.orders.update_status(record.OrderID, status, ports.clock.now(), version=version)


# The state each finish moves the record to (what each ending tells: ``domain.endings``).
_FINISH: dict[FinishOutcome, ProcessState] = {
    FinishOutcome.COMPLETE: ProcessState.PROCESSED,
    FinishOutcome.FAIL: ProcessState.ERROR,
    FinishOutcome.BEGIN_COMPENSATION: ProcessState.COMPENSATING,
    FinishOutcome.COMPENSATED: ProcessState.COMPENSATED,
    FinishOutcome.COMPENSATION_FAILED: ProcessState.COMPENSATION_FAILED,
}


def finish(work: FinishInput, ports: Ports) -> FinishResult:
    """Complete, fail, or move through compensation; then tell what the ending tells, from the
    outbox its write filled (what is not told now waits there for the Supervisor's sweep)."""
    attempt = Attempt.of(work)
    outcome = work.Outcome
    error = work.Error or ""
    if outcome is FinishOutcome.FAIL and _may_need_undoing(ports, attempt):
        outcome = FinishOutcome.BEGIN_COMPENSATION
    target = _FINISH[outcome]
    now = ports.clock.now()
    instance = attempt.instance_id
    policy = ports.settings.scheduler_policy

    def move(record: StateRecord) -> StateRecord:
        undoable = {s.name for s in _workflow(record).steps if s.compensation}
        repeated = record.ProcessState is ProcessState.COMPENSATING and record.LockedBy == instance
        if outcome is FinishOutcome.BEGIN_COMPENSATION and repeated:
            return record  # a repeat of this very move: nothing to change
        match outcome:
            case FinishOutcome.COMPLETE:
                return transitions.complete(record, instance=instance, now=now)
            case FinishOutcome.FAIL:
                return transitions.fail(record, instance=instance, now=now, error=error)
            case FinishOutcome.BEGIN_COMPENSATION:
                return transitions.begin_compensation(
                    record, instance=instance, now=now, policy=policy, error=error
                )
            case FinishOutcome.COMPENSATED:
                return transitions.compensated(record, instance=instance, now=now, undoable=undoable)
            case FinishOutcome.COMPENSATION_FAILED:
                return transitions.compensation_failed(record, instance=instance, now=now, error=error)

    stored = fenced_write(ports.states, attempt.order_id, move, cache=ports.records)
    if stored is None:
        # A repeat of this activity after its write landed: the record shows it; tell what is left.
        stored = ports.states.get(attempt.order_id)
        if stored is None or not _already_finished(stored.record, attempt, target):
            return FinishResult(Fenced=True)
    record = tell(ports, stored).record
    if outcome is FinishOutcome.BEGIN_COMPENSATION:
        return FinishResult(
            Fenced=False, State=record.ProcessState, ToCompensate=_to_compensate(ports, record)
        )
    return FinishResult(Fenced=False, State=record.ProcessState)


def _may_need_undoing(ports: Ports, attempt: Attempt) -> bool:
    """The log and the record, not the orchestration's memory, say whether anything may need
    undoing: a completed step is logged, and a step whose request went out is on the record
    whatever its reply said (R9, C10)."""
    if ports.compensation_log.entries(attempt.order_id):
        return True
    stored = _owned(ports, attempt)
    if stored is None:
        return False  # fenced out, or a repeat after this very move: the move itself decides
    undoable = {s.name for s in _workflow(stored.record).steps if s.compensation}
    return bool(transitions.steps_to_compensate(stored.record, undoable))


def _already_finished(record: StateRecord, attempt: Attempt, target: ProcessState) -> bool:
    if record.Attempt != attempt.number or record.ProcessState is not target:
        return False
    # Compensating stays locked by the same instance; terminal states are unlocked.
    return record.ProcessState not in LOCKED_STATES or record.LockedBy == attempt.instance_id


# --- The current engine: everything between two waits in one activity -----------------------


_MISSING = "the order is missing from the orders database"


def _ended(ending: Ending) -> AdvanceResult:
    return AdvanceResult(Ending=ending)


# How a finished attempt's record reads, and the finish that put it there.
_FINISHED_AS: dict[ProcessState, tuple[FinishOutcome, Ending]] = {
    ProcessState.PROCESSED: (FinishOutcome.COMPLETE, Ending.PROCESSED),
    ProcessState.ERROR: (FinishOutcome.FAIL, Ending.ERROR),
    ProcessState.COMPENSATED: (FinishOutcome.COMPENSATED, Ending.COMPENSATED),
    ProcessState.COMPENSATION_FAILED: (FinishOutcome.COMPENSATION_FAILED, Ending.COMPENSATION_FAILED),
}


def _fenced(attempt: Attempt, ports: Ports) -> AdvanceResult:
    """The record is not this attempt's to write: a newer attempt owns it — or this very attempt
    finished it, and this is a repeat of the call whose notifications did not all go out. Then
    finishing again sends them (their MessageIds drop what was already sent)."""
    stored = ports.states.get(attempt.order_id)
    record = None if stored is None else stored.record
    if record is None or record.Attempt != attempt.number or record.ProcessState not in _FINISHED_AS:
        return _ended(Ending.FENCED)
    outcome, ending = _FINISHED_AS[record.ProcessState]
    return _finish(attempt, ports, outcome, record.LastError, ending)


def advance(work: AdvanceInput, ports: Ports) -> AdvanceResult:
    """Take the attempt as far as it goes without waiting: record the step the reply answers
    (when there is one), run local steps, then begin the next Agent step and send its request
    (``Wait``) — or finish the attempt (``Ending``). A permanent failure fails the order or turns
    to compensation, newest first (R9), within the same call. Each part is the activity the
    first engine called on its own, so a repeat of this one is as safe as a repeat of each.
    """
    attempt = Attempt.of(work)
    answered = work.answered()
    if answered is None:
        # The start (E7): a fresh read; the order is read once here and cached for later calls.
        # Not read_order: its list of what to undo would be read again by _next.
        if _fresh(ports, attempt) is None:
            return _ended(Ending.FENCED)
        if _order(ports, attempt.order_id) is None:
            return _finish(attempt, ports, FinishOutcome.FAIL, _MISSING, Ending.ERROR)
        return _run(attempt, ports, work.Nonce)
    step, reply = answered
    if reply.Outcome is AgentOutcome.OK:
        if record_step(step.recording(reply.Result or {}), ports).Fenced:
            return _fenced(attempt, ports)
    else:
        stored = _owned(ports, attempt)
        error = f"{step.Action}: {reply.Error}"
        failed = _fenced(attempt, ports) if stored is None else _failed(attempt, ports, stored.record, error)
        if failed is not None:
            return failed
    return _run(attempt, ports, work.Nonce)


@dataclass(frozen=True)
class _Todo:
    """The next thing the attempt does: a step's action, where it runs, and what it is given."""

    step: str
    action: str
    runs: Runs
    data: dict[str, Any]


def _run(attempt: Attempt, ports: Ports, nonce: str | None) -> AdvanceResult:
    """Local steps until the next Agent step, whose request goes out (with ``nonce``); or the
    attempt's end."""
    while True:
        stored = _owned(ports, attempt)
        if stored is None:
            return _fenced(attempt, ports)
        todo = _next(attempt, ports, stored.record)
        if not isinstance(todo, _Todo):
            return todo
        result = _do(attempt, ports, stored.record, todo, nonce)
        if result is not None:
            return result


def _next(attempt: Attempt, ports: Ports, record: StateRecord) -> _Todo | AdvanceResult:
    """Forward: the first step not done. Compensating: the newest logged step not undone."""
    workflow = _workflow(record)
    if record.ProcessState is ProcessState.COMPENSATING:
        pending = _to_compensate(ports, record)
        if not pending:
            return _finish(attempt, ports, FinishOutcome.COMPENSATED, None, Ending.COMPENSATED)
        entry = pending[0]
        step = workflow.step(entry.Step)
        return _Todo(step.name, entry.Action, step.compensation_runs, dict(entry.Data))
    remaining = [s for s in workflow.steps if s.name not in record.CompletedSteps]
    if not remaining:
        return _finish(attempt, ports, FinishOutcome.COMPLETE, None, Ending.PROCESSED)
    order = _order(ports, attempt.order_id)
    if order is None:
        return _finish(attempt, ports, FinishOutcome.FAIL, _MISSING, Ending.ERROR)
    return _Todo(remaining[0].name, remaining[0].name, remaining[0].runs, order.wire())


def _do(
    attempt: Attempt, ports: Ports, record: StateRecord, todo: _Todo, nonce: str | None
) -> AdvanceResult | None:
    """Run a local action (None: go on), or begin an Agent step and send its request (Wait)."""
    work = attempt.payload().for_step(todo.step, todo.action)
    if todo.runs is Runs.LOCAL:
        done = run_local_step(work.running_locally(todo.data), ports)
        if done.Fenced:
            return _ended(Ending.FENCED)
        return None if done.Error is None else _failed(attempt, ports, record, done.Error)
    begun = begin_step(work, ports)
    if begun.Fenced:
        return _ended(Ending.FENCED)
    if begun.Exhausted:
        return _failed(attempt, ports, record, begun.Error or "")
    complete_by, calls = begun.grant()
    sent = send_agent_request(work.requesting(complete_by, calls, todo.data, nonce), ports)
    return AdvanceResult(
        Wait=PendingRequest(RequestID=sent, CompleteBy=complete_by, Step=todo.step, Action=todo.action)
    )


def _failed(attempt: Attempt, ports: Ports, record: StateRecord, error: str) -> AdvanceResult | None:
    """A permanent failure: in compensation, the order ends CompensationFailed; otherwise it
    fails, and ``finish`` turns it to compensation when anything logged may need undoing. None:
    go on (now compensating)."""
    if record.ProcessState is ProcessState.COMPENSATING:
        return _finish(attempt, ports, FinishOutcome.COMPENSATION_FAILED, error, Ending.COMPENSATION_FAILED)
    finished = finish(attempt.payload().finishing(FinishOutcome.FAIL, error), ports)
    if finished.Fenced:
        return _ended(Ending.FENCED)
    if finished.State is ProcessState.COMPENSATING:
        return None
    return _ended(Ending.ERROR)


def _finish(
    attempt: Attempt, ports: Ports, outcome: FinishOutcome, error: str | None, ending: Ending
) -> AdvanceResult:
    finished = finish(attempt.payload().finishing(outcome, error), ports)
    return _ended(Ending.FENCED if finished.Fenced else ending)


def _order(ports: Ports, order_id: str) -> OrderSnapshot | None:
    order = ports.orders_read.get(order_id) or ports.orders.get(order_id)
    if order is None:
        return None
    ports.orders_read.put(order_id, order)
    return _snapshot(order)
