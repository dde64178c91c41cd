"""The state machine, one transition at a time."""

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from domain import transitions as t
from domain.endings import ENDINGS, GAVE_UP_ALERT, Notice, Part
from domain.errors import (
    FencedOut,
    IllegalTransition,
    NotClaimable,
    NotExpired,
    RetryBudgetExhausted,
)
from domain.policy import RecoveryPolicy, SchedulerPolicy
from domain.record import START_STEP, StateRecord
from domain.states import OrderStatus, ProcessState
from tests.support.clock import T0
from tests.support.records import pending, processing

POLICY = SchedulerPolicy()


def test_create_matches_the_pattern_initial_record() -> None:
    record = pending("o-1", T0)
    assert record.ProcessState is ProcessState.PENDING
    assert record.LockedBy is None and record.CompleteBy is None
    assert record.FailureCount == 0 and record.Attempt == 0


def test_claim_takes_the_next_attempt_with_a_start_grace() -> None:
    claimed = t.claim(pending("o-1", T0), now=T0, policy=POLICY)
    assert claimed.ProcessState is ProcessState.PROCESSING
    assert claimed.Attempt == 1
    assert claimed.LockedBy == "o-1-1"
    assert claimed.CompleteBy == T0 + POLICY.start_grace
    with pytest.raises(NotClaimable):
        t.claim(claimed, now=T0, policy=POLICY)


def test_claim_waits_for_not_before() -> None:
    cooling = replace(pending("o-1", T0), NotBefore=T0 + timedelta(minutes=5))
    with pytest.raises(NotClaimable):
        t.claim(cooling, now=T0, policy=POLICY)
    assert t.claim(cooling, now=T0 + timedelta(minutes=5), policy=POLICY).Attempt == 1


def test_every_orchestration_transition_is_fenced() -> None:
    record = processing("o-1", T0)
    stale = "o-1-0"
    moves = [
        lambda: t.begin_step(record, instance=stale, step="A", now=T0, policy=POLICY),
        lambda: t.complete_step(record, instance=stale, step="A", now=T0, policy=POLICY),
        lambda: t.complete(record, instance=stale, now=T0),
        lambda: t.fail(record, instance=stale, now=T0, error="x"),
        lambda: t.begin_compensation(record, instance=stale, now=T0, policy=POLICY, error="x"),
    ]
    for move in moves:
        with pytest.raises(FencedOut):
            move()


def test_begin_step_sets_the_step_deadline_and_debits_the_budget() -> None:
    record = processing("o-1", T0)
    now = T0 + timedelta(seconds=5)
    started = t.begin_step(record, instance="o-1-1", step="Charge", now=now, policy=POLICY, calls_wanted=5)
    assert started.calls_granted == 5
    assert started.record.CompleteBy == now + POLICY.step_timeout
    assert started.record.CurrentStep == "Charge"
    assert started.record.RetryBudget.used("Charge") == 5


def test_the_budget_grants_only_what_is_left_then_refuses() -> None:
    policy = SchedulerPolicy(max_calls_per_step=7)
    recovery = RecoveryPolicy(quick_retries=5)

    def next_attempt(record):  # type: ignore[no-untyped-def]
        """The step expires, the Supervisor sends it back, the starter claims it again."""
        late = (record.CompleteBy or T0) + timedelta(seconds=1)
        back = t.recover_expired(record, expected_locked_by=record.LockedBy or "", now=late, policy=recovery)
        return t.claim(back.record, now=late, policy=policy)

    record = processing("o-1", T0, policy)
    first = t.begin_step(record, instance="o-1-1", step="Charge", now=T0, policy=policy, calls_wanted=5)
    record = next_attempt(first.record)
    second = t.begin_step(record, instance="o-1-2", step="Charge", now=T0, policy=policy, calls_wanted=5)
    assert second.calls_granted == 2
    record = next_attempt(second.record)
    with pytest.raises(RetryBudgetExhausted):
        t.begin_step(record, instance="o-1-3", step="Charge", now=T0, policy=policy)


def test_complete_step_is_idempotent_and_keeps_a_deadline() -> None:
    record = processing("o-1", T0)
    started = t.begin_step(record, instance="o-1-1", step="A", now=T0, policy=POLICY).record
    done = t.complete_step(started, instance="o-1-1", step="A", now=T0, policy=POLICY)
    again = t.complete_step(done, instance="o-1-1", step="A", now=T0, policy=POLICY)
    assert done.CompletedSteps == again.CompletedSteps == ("A",)
    assert done.CurrentStep is None
    assert done.CompleteBy == T0 + POLICY.start_grace  # still visible to the Supervisor
    with pytest.raises(IllegalTransition):
        t.begin_step(done, instance="o-1-1", step="A", now=T0, policy=POLICY)


def test_complete_releases_the_lock() -> None:
    done = t.complete(processing("o-1", T0), instance="o-1-1", now=T0)
    assert done.ProcessState is ProcessState.PROCESSED
    assert done.LockedBy is None and done.CompleteBy is None


def test_fail_records_the_failed_step_and_error() -> None:
    record = processing("o-1", T0)
    started = t.begin_step(record, instance="o-1-1", step="Charge", now=T0, policy=POLICY).record
    failed = t.fail(started, instance="o-1-1", now=T0, error="card declined")
    assert failed.ProcessState is ProcessState.ERROR
    assert failed.FailedStep == "Charge" and failed.LastError == "card declined"
    assert failed.LockedBy is None


def _with_steps(*steps: str):
    record = processing("o-1", T0)
    for step in steps:
        record = t.begin_step(record, instance="o-1-1", step=step, now=T0, policy=POLICY).record
        record = t.complete_step(record, instance="o-1-1", step=step, now=T0, policy=POLICY)
    return record


def test_compensation_runs_in_reverse_order_and_ends_compensated() -> None:
    record = _with_steps("A", "B", "C")
    comp = t.begin_compensation(record, instance="o-1-1", now=T0, policy=POLICY, error="D refused")
    assert comp.ProcessState is ProcessState.COMPENSATING and comp.LockedBy == "o-1-1"
    assert t.steps_to_compensate(comp) == ("C", "B", "A")
    with pytest.raises(IllegalTransition):
        t.compensated(comp, instance="o-1-1", now=T0)
    for step in t.steps_to_compensate(comp):
        comp = t.begin_step(comp, instance="o-1-1", step=step, now=T0, policy=POLICY).record
        comp = t.complete_step(comp, instance="o-1-1", step=step, now=T0, policy=POLICY)
    assert comp.CompensatedSteps == ("C", "B", "A")
    # A compensation's budget is its own, apart from the forward step's.
    assert comp.RetryBudget.used("C") == 1 and comp.RetryBudget.used("undo:C") == 1
    final = t.compensated(comp, instance="o-1-1", now=T0)
    assert final.ProcessState is ProcessState.COMPENSATED and final.LockedBy is None


def test_a_step_whose_request_went_out_is_undone_first_though_never_recorded_done() -> None:
    """D began (its budget debited, its request sent) and was refused: the remote may have
    acted, so D is undone too, newest first; a step that never began is not."""
    record = _with_steps("A", "B")
    record = t.begin_step(record, instance="o-1-1", step="D", now=T0, policy=POLICY).record
    assert t.went_out(record, "D") and t.went_out(record, "A") and not t.went_out(record, "E")
    comp = t.begin_compensation(record, instance="o-1-1", now=T0, policy=POLICY, error="D refused")
    assert t.steps_to_compensate(comp) == ("D", "B", "A")
    assert t.steps_to_compensate(comp, undoable={"D", "A"}) == ("D", "A")
    with pytest.raises(IllegalTransition):
        t.complete_step(comp, instance="o-1-1", step="E", now=T0, policy=POLICY)  # never began
    for step in t.steps_to_compensate(comp):
        comp = t.begin_step(comp, instance="o-1-1", step=step, now=T0, policy=POLICY).record
        comp = t.complete_step(comp, instance="o-1-1", step=step, now=T0, policy=POLICY)
    with pytest.raises(IllegalTransition):  # not while D is still to undo
        t.compensated(replace(comp, CompensatedSteps=("B", "A")), instance="o-1-1", now=T0)
    assert t.compensated(comp, instance="o-1-1", now=T0).ProcessState is ProcessState.COMPENSATED


def test_a_failed_compensation_is_its_own_state() -> None:
    comp = t.begin_compensation(_with_steps("A"), instance="o-1-1", now=T0, policy=POLICY, error="x")
    failed = t.compensation_failed(comp, instance="o-1-1", now=T0, error="refund refused")
    assert failed.ProcessState is ProcessState.COMPENSATION_FAILED
    assert failed.LastError == "refund refused" and failed.LockedBy is None


def test_compensating_a_step_that_never_began_is_illegal_but_a_begun_one_is_allowed() -> None:
    record = t.begin_step(_with_steps("A"), instance="o-1-1", step="B", now=T0, policy=POLICY).record
    comp = t.begin_compensation(record, instance="o-1-1", now=T0, policy=POLICY, error="x")
    with pytest.raises(IllegalTransition):
        t.complete_step(comp, instance="o-1-1", step="C", now=T0, policy=POLICY)
    # B began, its reply never came: its effect may exist, so its undo is recorded.
    undone = t.complete_step(comp, instance="o-1-1", step="B", now=T0, policy=POLICY)
    assert undone.CompensatedSteps == ("B",)


def test_recovery_follows_the_two_tier_policy() -> None:
    recovery = RecoveryPolicy(quick_retries=2, extended_retries=1, cooldown=timedelta(minutes=10))
    now = T0
    record = pending("o-1", T0)
    outcomes = []
    while True:
        record = t.claim(record, now=now, policy=POLICY)
        record = t.begin_step(
            record, instance=record.LockedBy or "", step="Reserve", now=now, policy=POLICY
        ).record
        now = record.CompleteBy + timedelta(seconds=1)
        result = t.recover_expired(record, expected_locked_by=record.LockedBy or "", now=now, policy=recovery)
        outcomes.append(result.outcome)
        record = result.record
        if result.outcome is t.RecoveryOutcome.COOL_DOWN:
            assert record.NotBefore == now + timedelta(minutes=10)
            now = record.NotBefore
        if result.outcome is t.RecoveryOutcome.GAVE_UP:
            break
    assert outcomes == ["retry", "retry", "cool_down", "gave_up"]
    assert record.ProcessState is ProcessState.ERROR
    assert record.FailureCount == 4 and record.step_failures("Reserve") == 4
    assert record.Attempt == 4 and record.FailedStep == "Reserve"


def test_recovery_checks_the_expired_lock_and_the_deadline() -> None:
    record = processing("o-1", T0)
    assert record.CompleteBy is not None
    with pytest.raises(NotExpired):
        t.recover_expired(record, expected_locked_by="o-1-1", now=T0, policy=RecoveryPolicy())
    late = record.CompleteBy + timedelta(seconds=1)
    with pytest.raises(FencedOut):
        t.recover_expired(record, expected_locked_by="o-1-0", now=late, policy=RecoveryPolicy())
    recovered = t.recover_expired(record, expected_locked_by="o-1-1", now=late, policy=RecoveryPolicy())
    assert recovered.step == START_STEP
    assert recovered.record.ProcessState is ProcessState.PENDING


def test_an_expired_compensation_is_retried_as_a_compensation_then_fails() -> None:
    recovery = RecoveryPolicy(quick_retries=1, extended_retries=0)
    comp = t.begin_compensation(_with_steps("A"), instance="o-1-1", now=T0, policy=POLICY, error="x")
    late = (comp.CompleteBy or T0) + timedelta(seconds=1)
    first = t.recover_expired(comp, expected_locked_by="o-1-1", now=late, policy=recovery)
    assert first.record.ProcessState is ProcessState.PENDING and first.record.CompensationRequested
    again = t.claim(first.record, now=late, policy=POLICY)
    assert again.ProcessState is ProcessState.COMPENSATING and again.LockedBy == "o-1-2"
    later = (again.CompleteBy or T0) + timedelta(seconds=1)
    second = t.recover_expired(again, expected_locked_by="o-1-2", now=later, policy=recovery)
    assert second.outcome is t.RecoveryOutcome.GAVE_UP
    assert second.record.ProcessState is ProcessState.COMPENSATION_FAILED


def test_operator_resubmit_resumes_an_error_order_at_its_failed_step() -> None:
    record = _with_steps("A")
    record = t.begin_step(record, instance="o-1-1", step="B", now=T0, policy=POLICY, calls_wanted=99).record
    assert record.RetryBudget.remaining("B") == 0
    failed = t.fail(record, instance="o-1-1", now=T0, error="permanent")
    again = t.resubmit(failed, now=T0)
    assert again.ProcessState is ProcessState.PENDING and again.CompletedSteps == ("A",)
    # The operator's fresh budget for the failed step; the completed step's spend stays.
    assert again.RetryBudget.remaining("B") == POLICY.max_calls_per_step
    assert again.RetryBudget.used("A") == 1
    assert again.FailureCount == failed.FailureCount and again.Attempt == failed.Attempt
    with pytest.raises(IllegalTransition):
        t.resubmit(again, now=T0)


def test_operator_compensation_of_an_error_or_failed_compensation() -> None:
    failed = t.fail(_with_steps("A"), instance="o-1-1", now=T0, error="permanent")
    requested = t.request_compensation(failed, now=T0)
    assert requested.ProcessState is ProcessState.PENDING and requested.CompensationRequested
    claimed = t.claim(requested, now=T0, policy=POLICY)
    assert claimed.ProcessState is ProcessState.COMPENSATING
    comp_failed = t.compensation_failed(claimed, instance=claimed.LockedBy or "", now=T0, error="x")
    assert t.request_compensation(comp_failed, now=T0).CompensationRequested
    processed = t.complete(processing("o-2", T0), instance="o-2-1", now=T0)
    with pytest.raises(IllegalTransition):
        t.request_compensation(processed, now=T0)


def test_a_repeated_begin_of_the_same_step_debits_nothing_more() -> None:
    record = processing("o-1", T0)
    first = t.begin_step(record, instance="o-1-1", step="Charge", now=T0, policy=POLICY, calls_wanted=6)
    later = T0 + timedelta(seconds=3)
    again = t.begin_step(
        first.record, instance="o-1-1", step="Charge", now=later, policy=POLICY, calls_wanted=6
    )
    assert again.calls_granted == first.calls_granted == 6
    assert again.record.RetryBudget.used("Charge") == 6  # not 12
    assert again.record.CompleteBy == first.record.CompleteBy  # the same deadline
    done = t.complete_step(again.record, instance="o-1-1", step="Charge", now=later, policy=POLICY)
    assert done.CurrentGrant == 0


def test_a_give_up_is_written_with_its_notice_pending_and_an_operator_move_clears_it() -> None:
    record = processing("o-1", T0)
    late = (record.CompleteBy or T0) + timedelta(seconds=1)
    gave_up = t.recover_expired(
        record,
        expected_locked_by="o-1-1",
        now=late,
        policy=RecoveryPolicy(quick_retries=0, extended_retries=0),
    ).record
    assert gave_up.ProcessState is ProcessState.ERROR and gave_up.NoticePending
    assert gave_up.Untold == Notice("Failed", OrderStatus.FAILED, GAVE_UP_ALERT)
    told = t.told(gave_up, of=gave_up, done=list(Part), now=late)
    assert not told.NoticePending and told.ProcessState is ProcessState.ERROR
    assert t.told(told, of=gave_up, done=list(Part), now=late) is told  # told already: unchanged
    reopened = t.resubmit(gave_up, now=late)
    assert not reopened.NoticePending  # moot: the order is moving again
    with pytest.raises(IllegalTransition):
        t.told(reopened, of=gave_up, done=[Part.STATUS], now=late)


@pytest.mark.parametrize(
    ("end", "state"),
    [
        (lambda r, now: t.complete(r, instance="o-1-1", now=now), ProcessState.PROCESSED),
        (lambda r, now: t.fail(r, instance="o-1-1", now=now, error="no"), ProcessState.ERROR),
    ],
)
def test_an_ending_is_written_with_all_it_tells_and_each_part_is_cleared_on_its_own(
    end: Callable[[StateRecord, datetime], StateRecord], state: ProcessState
) -> None:
    record = processing("o-1", T0)
    ended = end(record, T0)
    assert ended.ProcessState is state and ended.Untold == ENDINGS[state]
    parts = ended.Untold.parts()
    first = t.told(ended, of=ended, done=parts[:1], now=T0)
    assert (first.Untold.parts() if first.Untold else ()) == parts[1:]  # None once all is told
    assert t.told(first, of=ended, done=parts, now=T0).Untold is None


def test_an_ending_from_compensation_tells_its_own_notice() -> None:
    record = processing("o-1", T0)
    compensating = t.begin_compensation(record, instance="o-1-1", now=T0, policy=POLICY, error="x")
    assert compensating.Untold is None  # not an ending: nothing to tell yet
    done = t.compensated(compensating, instance="o-1-1", now=T0)
    assert done.Untold == Notice("Cancelled", OrderStatus.COMPENSATED, "OrderCompensated")
    failed = t.compensation_failed(compensating, instance="o-1-1", now=T0, error="y")
    assert failed.Untold == ENDINGS[ProcessState.COMPENSATION_FAILED]


def test_a_retry_is_not_a_notice() -> None:
    record = processing("o-1", T0)
    late = (record.CompleteBy or T0) + timedelta(seconds=1)
    retried = t.recover_expired(record, expected_locked_by="o-1-1", now=late, policy=RecoveryPolicy())
    assert retried.record.ProcessState is ProcessState.PENDING and not retried.record.NoticePending
