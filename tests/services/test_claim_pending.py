"""The starter's claim (E4) and its admission cap (C3)."""

import threading
from datetime import timedelta

from adapters.clock import ManualClock
from domain import transitions
from domain.policy import RecoveryPolicy, SchedulerPolicy
from domain.states import ProcessState
from services.claim_pending import claim_next, claim_one, claim_pending
from tests.support.records import pending, processing
from tests.support.stores import Stores

POLICY = SchedulerPolicy()


def test_claims_pending_records_with_attempt_specific_instance_ids(
    stores: Stores, clock: ManualClock
) -> None:
    for n in range(3):
        stores.states.create_if_absent(pending(f"o-{n}", clock.now()))
    report = claim_pending(stores.states, clock, POLICY, max_in_flight=10, batch_size=10)
    assert sorted(c.instance_id for c in report.claims) == ["o-0-1", "o-1-1", "o-2-1"]
    assert all(c.workflow_version == "v1" for c in report.claims)
    for claim in report.claims:
        stored = stores.states.get(claim.order_id)
        assert stored is not None
        assert stored.record.ProcessState is ProcessState.PROCESSING
        assert stored.record.LockedBy == claim.instance_id
        assert stored.record.CompleteBy == clock.now() + POLICY.start_grace


def test_the_in_flight_cap_bounds_what_is_claimed(stores: Stores, clock: ManualClock) -> None:
    stores.states.create_if_absent(processing("busy-1", clock.now()))
    stores.states.create_if_absent(processing("busy-2", clock.now()))
    for n in range(5):
        stores.states.create_if_absent(pending(f"o-{n}", clock.now()))
    report = claim_pending(stores.states, clock, POLICY, max_in_flight=4, batch_size=10)
    assert report.in_flight == 2 and report.capacity == 2 and len(report.claims) == 2
    full = claim_pending(stores.states, clock, POLICY, max_in_flight=4, batch_size=10)
    assert full.claims == [] and full.capacity == 0


def test_a_cooling_record_waits_for_not_before(stores: Stores, clock: ManualClock) -> None:
    record = transitions.claim(pending("o-1", clock.now()), now=clock.now(), policy=POLICY)
    late = clock.advance(POLICY.start_grace + timedelta(seconds=1))
    cooling = transitions.recover_expired(
        record, expected_locked_by="o-1-1", now=late, policy=RecoveryPolicy(quick_retries=0)
    ).record
    stores.states.create_if_absent(cooling)
    assert claim_pending(stores.states, clock, POLICY, max_in_flight=5, batch_size=5).claims == []
    clock.advance(RecoveryPolicy().cooldown)
    [claim] = claim_pending(stores.states, clock, POLICY, max_in_flight=5, batch_size=5).claims
    assert claim.instance_id == "o-1-2"


def test_concurrent_starters_never_claim_one_attempt_twice(stores: Stores, clock: ManualClock) -> None:
    for n in range(60):
        stores.states.create_if_absent(pending(f"o-{n:02d}", clock.now()))
    barrier = threading.Barrier(4)
    claimed: list[str] = []
    lock = threading.Lock()

    def starter() -> None:
        barrier.wait()
        for _ in range(30):
            report = claim_pending(stores.states, clock, POLICY, max_in_flight=1000, batch_size=5)
            with lock:
                claimed.extend(c.instance_id for c in report.claims)

    threads = [threading.Thread(target=starter) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(claimed) == len(set(claimed)) == 60


def test_a_requested_compensation_is_claimed_into_compensating(stores: Stores, clock: ManualClock) -> None:
    failed = transitions.fail(processing("o-1", clock.now()), instance="o-1-1", now=clock.now(), error="x")
    stores.states.create_if_absent(transitions.request_compensation(failed, now=clock.now()))
    [claim] = claim_pending(stores.states, clock, POLICY, max_in_flight=5, batch_size=5).claims
    assert claim.stored.record.ProcessState is ProcessState.COMPENSATING


def test_claim_one_claims_the_new_record_it_was_given(stores: Stores, clock: ManualClock) -> None:
    created = stores.states.create_if_absent(pending("o-1", clock.now())).stored
    claim = claim_one(stores.states, clock, POLICY, created, max_in_flight=1)
    assert claim is not None and claim.instance_id == "o-1-1"
    assert stores.states.get("o-1") == claim.stored


def test_claim_one_respects_the_cap_and_loses_a_race_quietly(stores: Stores, clock: ManualClock) -> None:
    stores.states.create_if_absent(processing("busy", clock.now()))
    created = stores.states.create_if_absent(pending("o-1", clock.now())).stored
    assert claim_one(stores.states, clock, POLICY, created, max_in_flight=1) is None  # full
    assert stores.states.get("o-1").record.ProcessState is ProcessState.PENDING  # type: ignore[union-attr]
    # The starter claims it first: the submission path's copy is stale, and its claim loses.
    [winner] = claim_pending(stores.states, clock, POLICY, max_in_flight=10, batch_size=10).claims
    assert claim_one(stores.states, clock, POLICY, created, max_in_flight=10) is None
    assert stores.states.get("o-1") == winner.stored


class _RacingReads:
    """The state store, with every claimable query held until both finishers have read: both
    see the same oldest candidates before either claims."""

    def __init__(self, states: object, parties: int) -> None:
        self._states = states
        self._barrier = threading.Barrier(parties)

    def __getattr__(self, name: str) -> object:
        return getattr(self._states, name)

    def query_claimable(self, now, limit):  # type: ignore[no-untyped-def]
        found = self._states.query_claimable(now, limit)  # type: ignore[attr-defined]
        self._barrier.wait(timeout=10)
        return found


def _race_two_finishers(stores: Stores, clock: ManualClock, waiting: int) -> list[str]:
    for n in range(waiting):
        stores.states.create_if_absent(pending(f"o-{n}", clock.now()))
        clock.advance(timedelta(seconds=1))  # o-0 is the oldest
    racing = _RacingReads(stores.states, parties=2)
    claims: list[str] = []
    lock = threading.Lock()

    def finisher() -> None:
        claim = claim_next(racing, clock, POLICY, max_in_flight=10)  # type: ignore[arg-type]
        if claim is not None:
            with lock:
                claims.append(claim.instance_id)

    threads = [threading.Thread(target=finisher) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(claims)


def test_two_finishers_one_waiting_order_one_starts_it(stores: Stores, clock: ManualClock) -> None:
    assert _race_two_finishers(stores, clock, waiting=1) == ["o-0-1"]
    assert stores.states.get("o-0").record.Attempt == 1  # type: ignore[union-attr]


def test_two_finishers_never_claim_one_attempt_and_both_slots_refill(
    stores: Stores, clock: ManualClock
) -> None:
    # Both read o-0 first; one claimed it, the loser moved to the next oldest.
    assert _race_two_finishers(stores, clock, waiting=3) == ["o-0-1", "o-1-1"]
    assert stores.states.get("o-2").record.ProcessState is ProcessState.PENDING  # type: ignore[union-attr]


def test_claim_next_takes_the_oldest_and_respects_the_cap(stores: Stores, clock: ManualClock) -> None:
    stores.states.create_if_absent(processing("busy", clock.now()))
    for n in range(2):
        clock.advance(timedelta(seconds=1))
        stores.states.create_if_absent(pending(f"o-{n}", clock.now()))
    assert claim_next(stores.states, clock, POLICY, max_in_flight=1) is None  # the slot is taken
    claim = claim_next(stores.states, clock, POLICY, max_in_flight=2)
    assert claim is not None and claim.instance_id == "o-0-1"
    assert claim_next(stores.states, clock, POLICY, max_in_flight=2) is None
