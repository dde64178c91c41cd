"""Property-based tests of the state machine: any sequence of moves keeps the invariants.

Hypothesis drives one record through random transitions — right and stale instance IDs,
time jumps, operator actions — and after every step checks what must always hold.
"""

from datetime import timedelta

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from domain import transitions as t
from domain.errors import DomainError
from domain.policy import RecoveryPolicy, SchedulerPolicy
from domain.record import StateRecord, from_document, to_document
from domain.states import LOCKED_STATES, TERMINAL_STATES
from tests.support.clock import T0

STEPS = st.sampled_from(["Validate", "Reserve", "Charge"])
POLICY = SchedulerPolicy(max_calls_per_step=6)
RECOVERY = RecoveryPolicy(quick_retries=1, extended_retries=1, cooldown=timedelta(minutes=3))


class RecordMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = T0
        self.record = t.create("o-1", status_queue="q", order_hash="0" * 64, now=T0, policy=POLICY)
        self.seen_instances: list[str] = []

    def _instance(self, current: bool) -> str:
        if current and self.record.LockedBy:
            return self.record.LockedBy
        return f"o-1-{self.record.Attempt + 7}"  # never a real attempt of this record

    def _apply(self, move, *, operator: bool = False, fenced: bool = False) -> None:
        before = self.record
        try:
            after: StateRecord = move()
        except DomainError:
            return
        assert not fenced, "a move with a stale instance ID succeeded"
        if before.ProcessState in TERMINAL_STATES:
            assert operator, f"{before.ProcessState} was left without an operator"
        assert after.FailureCount >= before.FailureCount
        assert after.Attempt >= before.Attempt
        if after.LockedBy and after.LockedBy != before.LockedBy:
            assert after.LockedBy not in self.seen_instances, "an instance ID was reused"
            self.seen_instances.append(after.LockedBy)
        self.record = after

    @rule(seconds=st.integers(min_value=0, max_value=600))
    def advance(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)

    @rule()
    def claim(self) -> None:
        self._apply(lambda: t.claim(self.record, now=self.now, policy=POLICY))

    @rule(step=STEPS, calls=st.integers(1, 4), current=st.booleans())
    def begin_step(self, step: str, calls: int, current: bool) -> None:
        instance = self._instance(current)
        self._apply(
            lambda: (
                t.begin_step(
                    self.record, instance=instance, step=step, now=self.now, policy=POLICY, calls_wanted=calls
                ).record
            ),
            fenced=not current,
        )

    @rule(step=STEPS, current=st.booleans())
    def complete_step(self, step: str, current: bool) -> None:
        instance = self._instance(current)
        self._apply(
            lambda: t.complete_step(self.record, instance=instance, step=step, now=self.now, policy=POLICY),
            fenced=not current,
        )

    @rule(current=st.booleans())
    def complete(self, current: bool) -> None:
        instance = self._instance(current)
        self._apply(lambda: t.complete(self.record, instance=instance, now=self.now), fenced=not current)

    @rule(current=st.booleans())
    def fail(self, current: bool) -> None:
        instance = self._instance(current)
        self._apply(
            lambda: t.fail(self.record, instance=instance, now=self.now, error="e"), fenced=not current
        )

    @rule(current=st.booleans())
    def begin_compensation(self, current: bool) -> None:
        instance = self._instance(current)
        self._apply(
            lambda: t.begin_compensation(
                self.record, instance=instance, now=self.now, policy=POLICY, error="e"
            ),
            fenced=not current,
        )

    @rule(current=st.booleans())
    def compensated(self, current: bool) -> None:
        instance = self._instance(current)
        self._apply(lambda: t.compensated(self.record, instance=instance, now=self.now), fenced=not current)

    @rule(current=st.booleans())
    def compensation_failed(self, current: bool) -> None:
        instance = self._instance(current)
        self._apply(
            lambda: t.compensation_failed(self.record, instance=instance, now=self.now, error="e"),
            fenced=not current,
        )

    @rule(current=st.booleans())
    def supervisor_recovers(self, current: bool) -> None:
        instance = self._instance(current)
        self._apply(
            lambda: (
                t.recover_expired(
                    self.record, expected_locked_by=instance, now=self.now, policy=RECOVERY
                ).record
            ),
            fenced=not current,
        )

    @rule()
    def operator_resubmits(self) -> None:
        self._apply(lambda: t.resubmit(self.record, now=self.now), operator=True)

    @rule()
    def operator_requests_compensation(self) -> None:
        self._apply(lambda: t.request_compensation(self.record, now=self.now), operator=True)

    @invariant()
    def locked_by_is_set_iff_processing_or_compensating(self) -> None:
        locked = self.record.ProcessState in LOCKED_STATES
        assert (self.record.LockedBy is not None) == locked
        assert (self.record.CompleteBy is not None) == locked

    @invariant()
    def steps_are_consistent(self) -> None:
        done = self.record.CompletedSteps
        assert len(done) == len(set(done))
        begun = set(done) | {k for k in self.record.RetryBudget.CallsUsed if not k.startswith("undo:")}
        assert set(self.record.CompensatedSteps) <= begun
        budget = self.record.RetryBudget
        assert all(0 < used <= budget.MaxCallsPerStep for used in budget.CallsUsed.values())

    @invariant()
    def the_stored_document_round_trips(self) -> None:
        assert from_document(to_document(self.record)) == self.record


TestRecordMachine = RecordMachine.TestCase
TestRecordMachine.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
