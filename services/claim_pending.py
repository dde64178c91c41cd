"""The starter's claim (E4) with admission control on orders in flight (C3).

The cap is hard: every claim first takes one of ``max_in_flight`` slots from the state store
(``StateStore.acquire_slot``: one SQLite write transaction, or one If-Match replace of a Cosmos
item), then writes the claim. Counting locked records and then claiming let concurrent claimers
read the same count (Processing reached 51-53 with a cap of 50, issue 40).
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

from domain import transitions
from domain.errors import NotClaimable, PreconditionFailed
from domain.policy import SchedulerPolicy
from domain.ports import Clock, Slot, SlotOutcome, StateStore, Stored
from domain.states import LOCKED_STATES
from services import telemetry

# A slot whose holder's record is not locked by it is freed only once it is this old: the
# holder's claim write follows its slot within one store round trip (and its retries), and a
# slot freed before that write would let the cap be passed. Only crashes and recoveries by the
# Supervisor leave such slots behind; ended attempts and lost races free theirs at once.
SLOT_GRACE = timedelta(seconds=60)


@dataclass(frozen=True)
class Claim:
    """A record this starter now owns: start an attempt (``order_attempt``, whatever the record's
    ``WorkflowVersion``) as ``instance_id``."""

    stored: Stored

    @property
    def order_id(self) -> str:
        return self.stored.record.OrderID

    @property
    def instance_id(self) -> str:
        locked_by = self.stored.record.LockedBy
        assert locked_by is not None  # a claimed record is always locked
        return locked_by

    @property
    def workflow_version(self) -> str:
        return self.stored.record.WorkflowVersion


@dataclass(frozen=True)
class ClaimReport:
    claims: list[Claim] = field(default_factory=list)
    lost: int = 0  # candidates another starter claimed first
    in_flight: int = 0  # orders in flight before this run
    capacity: int = 0  # how many this run was allowed to claim


class _CapFull(Exception):
    """Every in-flight slot is held."""


def _claim(
    states: StateStore,
    clock: Clock,
    policy: SchedulerPolicy,
    candidate: Stored,
    *,
    max_in_flight: int,
    release: str | None = None,
) -> Claim | None:
    """A slot, then the conditional claim. None when the record was claimed first (its slot is
    freed); raises ``_CapFull`` when no slot is free."""
    now = clock.now()
    try:
        claimed = transitions.claim(candidate.record, now=now, policy=policy)
    except NotClaimable:
        if release is not None:
            states.release_slot(release)
        return None
    holder = claimed.LockedBy
    assert holder is not None  # a claimed record is always locked
    slot = Slot(holder, claimed.OrderID, now, now - SLOT_GRACE)
    outcome = states.acquire_slot(slot, limit=max_in_flight, release=release)
    if outcome is SlotOutcome.FULL:
        raise _CapFull
    if outcome is SlotOutcome.HELD:
        return None  # another claimer of this attempt is writing it: theirs, slot and all
    try:
        stored = states.replace(claimed, candidate.etag)
    except PreconditionFailed:
        states.release_slot(holder)
        return None
    # Any other failure may have written the claim or not: the slot stays, and is freed after
    # SLOT_GRACE if the record is not locked by its holder (never freed while it may be).
    telemetry.transitions.add(1, {"to_state": claimed.ProcessState.value})
    return Claim(stored)


def _claim_first(
    states: StateStore,
    clock: Clock,
    policy: SchedulerPolicy,
    candidates: Iterable[Stored],
    *,
    max_in_flight: int,
    release: str | None,
) -> Claim | None:
    """The first of ``candidates`` this claimer wins; ``release`` is handed over to it (one
    write), or freed if none is won."""
    for candidate in candidates:
        try:
            claim = _claim(states, clock, policy, candidate, max_in_flight=max_in_flight, release=release)
        except _CapFull:
            return None  # the release, if any, was written with the refusal
        release = None  # handed over (or freed) by that attempt
        if claim is not None:
            return claim
    if release is not None:
        states.release_slot(release)
    return None


def claim_pending(
    states: StateStore,
    clock: Clock,
    policy: SchedulerPolicy,
    *,
    max_in_flight: int,
    batch_size: int,
) -> ClaimReport:
    """Claim up to ``batch_size`` claimable records, never past ``max_in_flight`` in flight.

    Each claim takes a slot, then is a conditional replace on the ETag read by the query, so two
    starters can never both claim one attempt; the loser frees its slot and moves on.
    """
    in_flight = states.count_in_states(LOCKED_STATES)
    telemetry.in_flight.set(in_flight)
    capacity = max(0, min(batch_size, max_in_flight - in_flight))
    if capacity == 0:
        return ClaimReport(in_flight=in_flight, capacity=0)
    claims: list[Claim] = []
    lost = 0
    for candidate in states.query_claimable(clock.now(), capacity):
        try:
            claim = _claim(states, clock, policy, candidate, max_in_flight=max_in_flight)
        except _CapFull:
            break  # submissions and refills filled the slots since the count
        if claim is None:
            lost += 1
        else:
            claims.append(claim)
    return ClaimReport(claims=claims, lost=lost, in_flight=in_flight, capacity=capacity)


def claim_one(
    states: StateStore, clock: Clock, policy: SchedulerPolicy, stored: Stored, *, max_in_flight: int
) -> Claim | None:
    """Claim this one record now (a new order, from the submission path), if a slot is free:
    the same conditional replace as the starter's, so whichever claims first wins and the other
    moves on. None when the cap is full (the starter sweeps it up when there is room), or the
    record is not claimable any more."""
    return _claim_first(states, clock, policy, [stored], max_in_flight=max_in_flight, release=None)


# A finisher that loses the race for the oldest order tries the next ones: two finishers that end
# together then start two orders, not one (each candidate is still claimed conditionally).
NEXT_CANDIDATES = 4


def claim_next(
    states: StateStore,
    clock: Clock,
    policy: SchedulerPolicy,
    *,
    max_in_flight: int,
    ended: str | None = None,
) -> Claim | None:
    """The slot attempt ``ended`` just freed claims the oldest claimable record (work-conserving
    claims), handing the slot over in one write: the starter's conditional replace, so two
    finishers never claim one attempt. None when the cap is full (a submission or a starter
    filled the slot) or nothing is claimable (then ``ended``'s slot is freed)."""
    candidates = states.query_claimable(clock.now(), NEXT_CANDIDATES)
    return _claim_first(states, clock, policy, candidates, max_in_flight=max_in_flight, release=ended)
