"""The state machine of a state record, as pure functions.

Each function takes the current record and returns the next one, or raises a typed
``IllegalTransition``. Every transition an orchestration makes takes its instance ID and is
fenced (E5): it raises ``FencedOut`` unless ``LockedBy`` still names that instance. Writing
the result is the caller's job: a conditional replace on the ETag it read.

Invariants (property-tested): ``LockedBy`` and ``CompleteBy`` are set iff the state is
Processing or Compensating; ``FailureCount`` and ``Attempt`` never decrease; the terminal
states (Processed, Error, Compensated, CompensationFailed) are left only by operator action.
"""

from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum

from domain.endings import Part, notice
from domain.errors import (
    FencedOut,
    IllegalTransition,
    NotClaimable,
    NotExpired,
    RetryBudgetExhausted,
)
from domain.ids import instance_id, validate_order_id
from domain.policy import RecoveryPolicy, SchedulerPolicy
from domain.record import (
    DEFAULT_WORKFLOW_VERSION,
    START_STEP,
    RetryBudget,
    StateRecord,
    frozen_counts,
)
from domain.states import LOCKED_STATES, ProcessState

_ERROR_MAX_LENGTH = 2000


def _error_text(error: str) -> str:
    return error[:_ERROR_MAX_LENGTH]


def _require_state(record: StateRecord, allowed: frozenset[ProcessState], move: str) -> None:
    if record.ProcessState not in allowed:
        allowed_names = ", ".join(sorted(s.value for s in allowed))
        raise IllegalTransition(
            f"{move}: order {record.OrderID} is {record.ProcessState.value}; "
            f"allowed only from {allowed_names}"
        )


def _fence(record: StateRecord, instance: str, allowed: frozenset[ProcessState], move: str) -> None:
    if record.LockedBy != instance:
        raise FencedOut(f"{move}: order {record.OrderID} is locked by {record.LockedBy!r}, not {instance!r}")
    _require_state(record, allowed, move)


_PROCESSING = frozenset({ProcessState.PROCESSING})
UNDO_PREFIX = "undo:"


def step_key(state: ProcessState, step: str) -> str:
    """The key a step's budget and failure count are kept under.

    A compensation has its own budget and its own count, apart from the forward step's.
    """
    return f"{UNDO_PREFIX}{step}" if state is ProcessState.COMPENSATING else step


_COMPENSATING = frozenset({ProcessState.COMPENSATING})


def create(
    order_id: str,
    *,
    status_queue: str | None,
    order_hash: str,
    now: datetime,
    policy: SchedulerPolicy,
    workflow_version: str = DEFAULT_WORKFLOW_VERSION,
) -> StateRecord:
    """A new record (E3): Pending, unlocked, no CompleteBy, FailureCount 0."""
    return StateRecord(
        OrderID=validate_order_id(order_id),
        ProcessState=ProcessState.PENDING,
        LockedBy=None,
        CompleteBy=None,
        FailureCount=0,
        Attempt=0,
        StatusQueue=status_queue,
        OrderHash=order_hash,
        WorkflowVersion=workflow_version,
        RetryBudget=RetryBudget(MaxCallsPerStep=policy.max_calls_per_step),
        CreatedAt=now,
        UpdatedAt=now,
    )


# A record written while the orders database is down (C6, issue 37): the order is findable from
# its 202, but its order row is not written yet, so no attempt may claim it. A NotBefore past any
# clock keeps every claim query (``NotBefore <= now``) off it with no new field or index; the
# submission that writes the row releases it (``order_row_written``).
AWAITING_ORDER_ROW = datetime(9999, 12, 31, tzinfo=UTC)


def awaiting_order_row(record: StateRecord, dependency: str) -> StateRecord:
    """A new record held until its order row is written, naming what it waits on."""
    return replace(record, NotBefore=AWAITING_ORDER_ROW, Unavailable=dependency)


def is_awaiting_order_row(record: StateRecord) -> bool:
    """Held for its order row: still waiting (Pending), or given up on (Error, ``order_row_given_up``)
    and waiting for an operator or the submitter to send the submission again."""
    return (
        record.ProcessState in (ProcessState.PENDING, ProcessState.ERROR)
        and record.NotBefore == AWAITING_ORDER_ROW
    )


def order_row_given_up(record: StateRecord, now: datetime, reason: str) -> StateRecord:
    """The held record's submission ran out of copies (dead-lettered): the order ends visibly in
    Error, still unclaimable (it has no order row), until a copy of its submission writes the row."""
    if not is_awaiting_order_row(record):
        raise IllegalTransition(f"order_row_given_up: order {record.OrderID} is not awaiting its order row")
    return replace(record, ProcessState=ProcessState.ERROR, LastError=reason, UpdatedAt=now)


def order_row_written(record: StateRecord, now: datetime) -> StateRecord:
    """The held record, claimable now that its order row is written (also after it was given up)."""
    if not is_awaiting_order_row(record):
        raise IllegalTransition(f"order_row_written: order {record.OrderID} is not awaiting its order row")
    return replace(
        record,
        ProcessState=ProcessState.PENDING,
        NotBefore=None,
        Unavailable=None,
        LastError=None,
        UpdatedAt=now,
    )


def is_claimable(record: StateRecord, now: datetime) -> bool:
    return (
        record.ProcessState is ProcessState.PENDING
        and record.LockedBy is None
        and (record.NotBefore is None or record.NotBefore <= now)
    )


def claim(record: StateRecord, *, now: datetime, policy: SchedulerPolicy) -> StateRecord:
    """The starter's claim (E4): next attempt, attempt-specific LockedBy, start-grace CompleteBy.

    A record whose compensation was requested is claimed straight into Compensating.
    """
    if not is_claimable(record, now):
        raise NotClaimable(
            f"claim: order {record.OrderID} is {record.ProcessState.value}, "
            f"LockedBy={record.LockedBy!r}, NotBefore={record.NotBefore}"
        )
    attempt = record.Attempt + 1
    state = ProcessState.COMPENSATING if record.CompensationRequested else ProcessState.PROCESSING
    return replace(
        record,
        ProcessState=state,
        Attempt=attempt,
        LockedBy=instance_id(record.OrderID, attempt),
        CompleteBy=now + policy.start_grace,
        CurrentStep=None,
        CurrentGrant=0,
        NotBefore=None,
        Unavailable=None,
        UpdatedAt=now,
    )


@dataclass(frozen=True)
class StepStarted:
    record: StateRecord
    # Remote calls this run of the step may make: what the agent request carries as max attempts.
    calls_granted: int


def begin_step(
    record: StateRecord,
    *,
    instance: str,
    step: str,
    now: datetime,
    policy: SchedulerPolicy,
    calls_wanted: int = 1,
) -> StepStarted:
    """Start a step: its own CompleteBy, and a debit of the retry budget (R1, C2).

    Works for forward steps (Processing) and compensation steps (Compensating).
    """
    _fence(record, instance, LOCKED_STATES, "begin_step")
    if record.ProcessState is ProcessState.PROCESSING and step in record.CompletedSteps:
        raise IllegalTransition(f"begin_step: step {step} of {record.OrderID} is already done")
    if record.ProcessState is ProcessState.COMPENSATING and step in record.CompensatedSteps:
        raise IllegalTransition(f"begin_step: step {step} of {record.OrderID} is already compensated")
    if calls_wanted < 1:
        raise ValueError("calls_wanted must be at least 1")
    if record.CurrentStep == step and record.CurrentGrant > 0:
        # The same begin again (activities are at-least-once): same deadline, same grant.
        return StepStarted(record=replace(record, Unavailable=None), calls_granted=record.CurrentGrant)
    key = step_key(record.ProcessState, step)
    remaining = record.RetryBudget.remaining(key)
    if remaining == 0:
        raise RetryBudgetExhausted(
            f"begin_step: step {step} of {record.OrderID} has used all "
            f"{record.RetryBudget.MaxCallsPerStep} calls of its retry budget"
        )
    granted = min(calls_wanted, remaining)
    return StepStarted(
        record=replace(
            record,
            CurrentStep=step,
            CurrentGrant=granted,
            CompleteBy=now + policy.step_timeout,
            RetryBudget=record.RetryBudget.debit(key, granted),
            Unavailable=None,
            UpdatedAt=now,
        ),
        calls_granted=granted,
    )


def complete_step(
    record: StateRecord, *, instance: str, step: str, now: datetime, policy: SchedulerPolicy
) -> StateRecord:
    """Record a finished step (or a finished compensation of one). Idempotent for a repeat.

    CompleteBy moves to the start grace rather than to null, so an orchestration lost between
    two steps is still found by the Supervisor.
    """
    _fence(record, instance, LOCKED_STATES, "complete_step")
    if record.ProcessState is ProcessState.PROCESSING:
        done = record.CompletedSteps if step in record.CompletedSteps else (*record.CompletedSteps, step)
        record = replace(record, CompletedSteps=done)
    else:
        # A step that began may have had its effect even if it was never recorded as done
        # (its reply came too late): compensations are idempotent, so undoing it is safe.
        if not went_out(record, step):
            raise IllegalTransition(
                f"complete_step: cannot compensate {step} of {record.OrderID}: it never began"
            )
        undone = (
            record.CompensatedSteps if step in record.CompensatedSteps else (*record.CompensatedSteps, step)
        )
        record = replace(record, CompensatedSteps=undone)
    return replace(
        record,
        CurrentStep=None,
        CurrentGrant=0,
        CompleteBy=now + policy.start_grace,
        Unavailable=None,
        UpdatedAt=now,
    )


def _release(record: StateRecord, state: ProcessState, now: datetime, error: str | None) -> StateRecord:
    failed = error is not None
    return replace(
        record,
        ProcessState=state,
        FailedStep=(record.CurrentStep or START_STEP) if failed else None,
        LockedBy=None,
        CompleteBy=None,
        CurrentStep=None,
        CurrentGrant=0,
        NotBefore=None,
        LastError=record.LastError if error is None else _error_text(error),
        Unavailable=None,
        UpdatedAt=now,
    )


def _end(record: StateRecord, state: ProcessState, now: datetime, error: str | None) -> StateRecord:
    """A terminal state, with all its ending has to tell in the same write: the outbox."""
    return replace(_release(record, state, now, error), Untold=notice(state))


def complete(record: StateRecord, *, instance: str, now: datetime) -> StateRecord:
    """Every step done: Processed (E10), only while LockedBy still names this instance."""
    _fence(record, instance, _PROCESSING, "complete")
    return _end(record, ProcessState.PROCESSED, now, None)


def fail(record: StateRecord, *, instance: str, now: datetime, error: str) -> StateRecord:
    """A permanent failure with nothing to undo: Error, for an operator (E12)."""
    _fence(record, instance, _PROCESSING, "fail")
    return _end(record, ProcessState.ERROR, now, error)


def begin_compensation(
    record: StateRecord, *, instance: str, now: datetime, policy: SchedulerPolicy, error: str
) -> StateRecord:
    """A permanent failure after some steps completed: undo them in reverse order (R9)."""
    _fence(record, instance, _PROCESSING, "begin_compensation")
    return replace(
        record,
        ProcessState=ProcessState.COMPENSATING,
        CurrentStep=None,
        CurrentGrant=0,
        CompleteBy=now + policy.start_grace,
        CompensationRequested=True,
        LastError=_error_text(error),
        Unavailable=None,
        UpdatedAt=now,
    )


def went_out(record: StateRecord, step: str) -> bool:
    """Whether the forward step's request may have reached the remote service: it completed, or
    it began. ``begin_step`` debits the step's budget before its request is sent, so a debit is
    the durable trace of a request that may have gone out, whatever became of its reply."""
    return step in record.CompletedSteps or record.RetryBudget.used(step) > 0


def steps_to_compensate(record: StateRecord, undoable: Collection[str] | None = None) -> tuple[str, ...]:
    """Steps not yet undone whose request went out, newest first: the order compensations run
    in (R9). A step that began and was never recorded done is undone too, since the remote may
    have acted on it (a refused, ambiguous or late reply) and an undo is idempotent (C10); it
    began after every completed step, so it comes first.

    ``undoable`` names the steps that have a compensation; steps with nothing to undo are left out.
    """
    began = [
        key
        for key in record.RetryBudget.CallsUsed
        if not key.startswith(UNDO_PREFIX) and key not in record.CompletedSteps and went_out(record, key)
    ]
    return tuple(
        s
        for s in reversed((*record.CompletedSteps, *began))
        if s not in record.CompensatedSteps and (undoable is None or s in undoable)
    )


def compensated(
    record: StateRecord, *, instance: str, now: datetime, undoable: Collection[str] | None = None
) -> StateRecord:
    _fence(record, instance, _COMPENSATING, "compensated")
    pending = steps_to_compensate(record, undoable)
    if pending:
        raise IllegalTransition(
            f"compensated: order {record.OrderID} still has steps to undo: {', '.join(pending)}"
        )
    return _end(record, ProcessState.COMPENSATED, now, None)


def compensation_failed(record: StateRecord, *, instance: str, now: datetime, error: str) -> StateRecord:
    """Neither completed nor undone (R9, C8): a distinct state operators can find."""
    _fence(record, instance, _COMPENSATING, "compensation_failed")
    return _end(record, ProcessState.COMPENSATION_FAILED, now, error)


class RecoveryOutcome(StrEnum):
    RETRY = "retry"  # back to Pending at once
    COOL_DOWN = "cool_down"  # back to Pending after NotBefore
    GAVE_UP = "gave_up"  # Error or CompensationFailed: alert an operator
    HELD = "held"  # back to Pending at once, uncounted: the attempt ended on an outage


@dataclass(frozen=True)
class Recovery:
    record: StateRecord
    outcome: RecoveryOutcome
    step: str


def is_expired(record: StateRecord, now: datetime) -> bool:
    return record.ProcessState in LOCKED_STATES and record.CompleteBy is not None and record.CompleteBy < now


def _require_expired(record: StateRecord, expected_locked_by: str, now: datetime) -> None:
    if record.LockedBy != expected_locked_by:
        raise FencedOut(
            f"recover: order {record.OrderID} is now locked by {record.LockedBy!r}, "
            f"not the expired {expected_locked_by!r}"
        )
    if not is_expired(record, now):
        raise NotExpired(
            f"recover: order {record.OrderID} is {record.ProcessState.value} "
            f"with CompleteBy {record.CompleteBy}, not expired at {now}"
        )


def note_unavailable(record: StateRecord, *, instance: str, dependency: str, now: datetime) -> StateRecord:
    """The attempt's last word before it ends on an outage: ``dependency`` was unavailable for an
    activity's whole retry budget. Fenced; the next transition of any kind clears it."""
    _fence(record, instance, LOCKED_STATES, "note_unavailable")
    return replace(record, Unavailable=dependency, UpdatedAt=now)


def hold_for_outage(
    record: StateRecord, *, expected_locked_by: str, now: datetime, dependency: str
) -> Recovery:
    """The Supervisor's move on an expired attempt that ended on an outage (``domain.outage``):
    back to Pending at once, with no failure counted (R7 counts the order's own failures) and
    the dependency kept on the record, for operators, until the next claim."""
    _require_expired(record, expected_locked_by, now)
    held = replace(
        _release(record, ProcessState.PENDING, now, None),
        Unavailable=dependency,
        OutageHolds=record.OutageHolds + 1,
    )
    return Recovery(held, RecoveryOutcome.HELD, record.CurrentStep or START_STEP)


def recover_expired(
    record: StateRecord, *, expected_locked_by: str, now: datetime, policy: RecoveryPolicy
) -> Recovery:
    """The Supervisor's move on a record whose CompleteBy passed (E15, R7).

    Checks the expired LockedBy it saw in its scan, counts the failure, and either sends the
    record back to Pending (at once, then after a cool-down) or gives up.
    """
    _require_expired(record, expected_locked_by, now)
    step = record.CurrentStep or START_STEP
    key = step_key(record.ProcessState, step)
    step_failures = record.step_failures(key) + 1
    counted = replace(
        record,
        FailureCount=record.FailureCount + 1,
        StepFailures=frozen_counts({**record.StepFailures, key: step_failures}),
        OutageHolds=0,
    )
    compensating = record.ProcessState is ProcessState.COMPENSATING
    if step_failures > policy.quick_retries + policy.extended_retries:
        what = "compensation step" if compensating else "step"
        error = f"{what} {step} expired {step_failures} times (last attempt {record.LockedBy})"
        final = ProcessState.COMPENSATION_FAILED if compensating else ProcessState.ERROR
        # What it tells goes out after this write, from the outbox the write fills.
        gave_up = replace(_release(counted, final, now, error), Untold=notice(final, gave_up=True))
        return Recovery(gave_up, RecoveryOutcome.GAVE_UP, step)
    outcome = RecoveryOutcome.RETRY if step_failures <= policy.quick_retries else RecoveryOutcome.COOL_DOWN
    pending = replace(
        _release(counted, ProcessState.PENDING, now, None),
        NotBefore=now + policy.cooldown if outcome is RecoveryOutcome.COOL_DOWN else None,
    )
    return Recovery(pending, outcome, step)


_OPERATOR_RESUBMITTABLE = frozenset({ProcessState.ERROR})
_OPERATOR_COMPENSABLE = frozenset({ProcessState.ERROR, ProcessState.COMPENSATION_FAILED})


def resubmit(record: StateRecord, *, now: datetime) -> StateRecord:
    """Operator action (E12): an Error order goes back to Pending and resumes at its failed step.

    Completed steps stay completed; the failed step gets a fresh failure count and a fresh
    budget, which is the operator's decision to make.
    """
    _require_state(record, _OPERATOR_RESUBMITTABLE, "resubmit")
    _require_order_row(record, "resubmit")
    failed = record.FailedStep or START_STEP
    return replace(
        _reopen(record, now, compensate=False),
        StepFailures=frozen_counts({k: v for k, v in record.StepFailures.items() if k != failed}),
        RetryBudget=record.RetryBudget.reset(lambda key: key == failed),
    )


def request_compensation(record: StateRecord, *, now: datetime) -> StateRecord:
    """Operator action: undo an Error order, or retry a failed compensation (R9, C8).

    Compensations get fresh failure counts and budgets; forward steps keep theirs.
    """
    _require_state(record, _OPERATOR_COMPENSABLE, "compensate")
    _require_order_row(record, "compensate")

    def is_undo(key: str) -> bool:
        return key.startswith(UNDO_PREFIX)

    return replace(
        _reopen(record, now, compensate=True),
        StepFailures=frozen_counts({k: v for k, v in record.StepFailures.items() if not is_undo(k)}),
        RetryBudget=record.RetryBudget.reset(is_undo),
    )


def told(record: StateRecord, *, of: StateRecord, done: Collection[Part], now: datetime) -> StateRecord:
    """``done`` of the notice of ``of``'s ending went out: clear them from the outbox. Unchanged
    when they are cleared already (someone else told them); ``IllegalTransition`` when the record
    no longer shows that ending (an operator moved the order on, which made the rest moot)."""
    if (record.Attempt, record.ProcessState) != (of.Attempt, of.ProcessState):
        raise IllegalTransition(f"told: order {record.OrderID} is no longer {of.ProcessState.value}")
    if record.Untold is None or not set(done) & set(record.Untold.parts()):
        return record
    return replace(record, Untold=record.Untold.without(done), UpdatedAt=now)


def _require_order_row(record: StateRecord, move: str) -> None:
    if is_awaiting_order_row(record):
        # Its order row was never written, and only its submission holds the order's lines.
        raise IllegalTransition(
            f"{move}: order {record.OrderID} has no order row yet; resubmit its dead-lettered "
            "submission on the orders queue instead (ops dlq resubmit orders ID)"
        )


def _reopen(record: StateRecord, now: datetime, *, compensate: bool) -> StateRecord:
    # An operator moved the order on: what its ending had still to tell is moot now.
    return replace(
        record,
        Untold=None,
        ProcessState=ProcessState.PENDING,
        LockedBy=None,
        CompleteBy=None,
        NotBefore=None,
        CurrentStep=None,
        CurrentGrant=0,
        FailedStep=None,
        CompensationRequested=compensate,
        Unavailable=None,
        OutageHolds=0,
        UpdatedAt=now,
    )
