"""The starter's claim (E4) with admission control on orders in flight (C3)."""

from dataclasses import dataclass, field

from domain import transitions
from domain.errors import NotClaimable, PreconditionFailed
from domain.policy import SchedulerPolicy
from domain.ports import Clock, StateStore, Stored
from domain.states import LOCKED_STATES
from services import telemetry


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


def claim_pending(
    states: StateStore,
    clock: Clock,
    policy: SchedulerPolicy,
    *,
    max_in_flight: int,
    batch_size: int,
) -> ClaimReport:
    """Claim up to ``batch_size`` claimable records, never past ``max_in_flight`` in flight.

    Each claim is a conditional replace on the ETag read by the query, so two starters can
    never both claim one attempt; the loser just moves on.
    """
    in_flight = states.count_in_states(LOCKED_STATES)
    telemetry.in_flight.set(in_flight)
    capacity = max(0, min(batch_size, max_in_flight - in_flight))
    if capacity == 0:
        return ClaimReport(in_flight=in_flight, capacity=0)
    now = clock.now()
    claims: list[Claim] = []
    lost = 0
    for candidate in states.query_claimable(now, capacity):
        try:
            claimed = transitions.claim(candidate.record, now=now, policy=policy)
            claims.append(Claim(states.replace(claimed, candidate.etag)))
            telemetry.transitions.add(1, {"to_state": claimed.ProcessState.value})
        except (PreconditionFailed, NotClaimable):
            lost += 1
    return ClaimReport(claims=claims, lost=lost, in_flight=in_flight, capacity=capacity)


def claim_one(
    states: StateStore, clock: Clock, policy: SchedulerPolicy, stored: Stored, *, max_in_flight: int
) -> Claim | None:
    """Claim this one record now (a new order, from the submission path), if the in-flight cap
    allows: the same conditional replace as the starter's, so whichever claims first wins and
    the other moves on. None when the cap is full, or the record is not claimable any more."""
    if states.count_in_states(LOCKED_STATES) >= max_in_flight:
        return None  # the starter sweeps it up when there is room
    now = clock.now()
    try:
        claimed = transitions.claim(stored.record, now=now, policy=policy)
        claim = Claim(states.replace(claimed, stored.etag))
    except (PreconditionFailed, NotClaimable):
        return None
    telemetry.transitions.add(1, {"to_state": claimed.ProcessState.value})
    return claim


# A finisher that loses the race for the oldest order tries the next ones: two finishers that end
# together then start two orders, not one (each candidate is still claimed conditionally).
NEXT_CANDIDATES = 4


def claim_next(
    states: StateStore, clock: Clock, policy: SchedulerPolicy, *, max_in_flight: int
) -> Claim | None:
    """The slot an attempt just freed claims the oldest claimable record (work-conserving claims):
    the starter's conditional replace, so two finishers never claim one attempt. None when the
    cap is full (another finisher or a starter filled the slot) or nothing is claimable."""
    if states.count_in_states(LOCKED_STATES) >= max_in_flight:
        return None
    now = clock.now()
    for candidate in states.query_claimable(now, NEXT_CANDIDATES):
        try:
            claimed = transitions.claim(candidate.record, now=now, policy=policy)
            claim = Claim(states.replace(claimed, candidate.etag))
        except (PreconditionFailed, NotClaimable):
            continue  # another finisher or a starter took it: the next one
        telemetry.transitions.add(1, {"to_state": claimed.ProcessState.value})
        return claim
    return None
