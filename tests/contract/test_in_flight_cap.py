"""The in-flight cap is hard (C3, issue 40): concurrent claimers of every kind (the submission's
first claim, the refill when an attempt ends, the starter) never hold more than
``max_in_flight`` orders in flight, on every state store. Counting locked records before
claiming let 51-53 through with a cap of 50."""

import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from adapters.clock import ManualClock
from adapters.sqlite.state_store import SqliteStateStore
from domain import transitions
from domain.policy import RecoveryPolicy, SchedulerPolicy, SupervisorScan
from domain.ports import Slot, SlotOutcome, StateStore
from domain.states import LOCKED_STATES
from services.claim_pending import SLOT_GRACE, Claim, claim_next, claim_one, claim_pending
from services.supervise import supervise
from tests.support.clock import T0
from tests.support.records import pending, processing

POLICY = SchedulerPolicy()
CAP = 5
ORDERS = 24
CLAIMERS = 12


def _locked(states: StateStore) -> int:
    return states.count_in_states(LOCKED_STATES)


def _claim_as(kind: int, states: StateStore, clock: ManualClock, order: int) -> int:
    """A claim of each of the three kinds, by turns: how many orders it claimed."""
    if kind == 0:
        stored = states.get(f"o-{order % ORDERS:03}")
        assert stored is not None
        return claim_one(states, clock, POLICY, stored, max_in_flight=CAP) is not None
    if kind == 1:
        return claim_next(states, clock, POLICY, max_in_flight=CAP) is not None
    return len(claim_pending(states, clock, POLICY, max_in_flight=CAP, batch_size=CAP).claims)


def test_concurrent_claimers_of_every_kind_fill_the_cap_and_never_pass_it(state_store: StateStore) -> None:
    clock = ManualClock(T0)
    for n in range(ORDERS):
        state_store.create_if_absent(pending(f"o-{n:03}", T0))
    start = threading.Barrier(CLAIMERS)

    def claimer(n: int) -> int:
        start.wait()
        return sum(_claim_as((n + i) % 3, state_store, clock, n + i) for i in range(CAP))

    with ThreadPoolExecutor(CLAIMERS) as pool:
        claimed = sum(pool.map(claimer, range(CLAIMERS)))
    assert claimed == CAP  # every claim that returned wrote its record
    assert _locked(state_store) == CAP  # work-conserving: the cap filled, and no further


def test_refills_hand_the_slot_over_and_the_cap_holds_while_attempts_end(state_store: StateStore) -> None:
    """Finishers end their attempt and refill at once, each from its own thread: in flight stays
    at the cap, never above, until the orders run out."""
    clock = ManualClock(T0)
    for n in range(ORDERS):
        state_store.create_if_absent(pending(f"o-{n:03}", T0))
    first = claim_pending(state_store, clock, POLICY, max_in_flight=CAP, batch_size=CAP).claims
    assert len(first) == CAP
    highest = [0]
    lock = threading.Lock()

    def run(claim: Claim | None) -> int:
        ended = 0
        while claim is not None:
            done = transitions.complete(claim.stored.record, instance=claim.instance_id, now=clock.now())
            state_store.replace(done, claim.stored.etag)
            ended += 1
            claim = claim_next(state_store, clock, POLICY, max_in_flight=CAP, ended=claim.instance_id)
            with lock:
                highest[0] = max(highest[0], _locked(state_store))
        return ended

    with ThreadPoolExecutor(CAP) as pool:
        ended = sum(pool.map(run, first))
    assert ended == ORDERS  # the hand-overs drained every order
    assert highest[0] <= CAP
    assert _locked(state_store) == 0


def test_a_slot_left_by_a_crash_is_freed_after_the_grace_and_not_before(state_store: StateStore) -> None:
    clock = ManualClock(T0)
    # A claimer took the only slot and died before writing its claim.
    assert (
        state_store.acquire_slot(Slot("crashed", "o-x", T0, T0 - SLOT_GRACE), limit=1) is SlotOutcome.GRANTED
    )
    state_store.create_if_absent(pending("o-1", T0))
    stored = state_store.get("o-1")
    assert stored is not None
    assert claim_one(state_store, clock, POLICY, stored, max_in_flight=1) is None  # it may still write
    clock.advance(SLOT_GRACE + timedelta(seconds=1))
    assert claim_one(state_store, clock, POLICY, stored, max_in_flight=1) is not None


def test_an_attempt_the_supervisor_recovers_frees_its_slot_at_once(state_store: StateStore) -> None:
    """A silent attempt (its orchestration died, or its timer ended it, with no activity left to
    hand the slot over) is recovered by the Supervisor, which frees its slot: the retry and the
    next order are claimed within SLOT_GRACE. Kept to the grace, each expired attempt held a
    slot for up to a minute, and a loaded make demo ran with a third of its cap."""
    clock = ManualClock(T0)
    policy = SchedulerPolicy(start_grace=timedelta(seconds=4))  # make demo's
    first = state_store.create_if_absent(pending("o-1", T0)).stored
    assert claim_one(state_store, clock, policy, first, max_in_flight=1) is not None
    state_store.create_if_absent(pending("o-2", T0 + timedelta(seconds=1)))
    clock.advance(policy.start_grace + timedelta(seconds=1))  # o-1's attempt never began a step
    report = supervise(state_store, clock, RecoveryPolicy(), SupervisorScan())
    assert [r.record.OrderID for r in report.recovered] == ["o-1"]
    assert clock.now() - T0 < SLOT_GRACE
    claimed = claim_pending(state_store, clock, policy, max_in_flight=1, batch_size=2).claims
    assert [c.order_id for c in claimed] == ["o-1"]  # the retry, oldest first, in the freed slot
    assert len(state_store.slots_acquired()) == 1


def test_a_claimer_that_died_before_its_write_blocks_that_attempt_only_for_the_grace(
    state_store: StateStore,
) -> None:
    """A claimer took o-1's slot for its next attempt and died (devhost SIGKILLed) before it
    wrote the claim. Every later claimer of o-1 computes the same attempt: HELD while the dead
    one may still write, then the slot is taken over, with the cap far from full. Only a full
    cap swept stale slots, so o-1 stayed Pending for good: the order a loaded make demo left
    unfinished (app-a-0122)."""
    clock = ManualClock(T0)
    stored = state_store.create_if_absent(pending("o-1", T0)).stored
    holder = transitions.claim(stored.record, now=T0, policy=POLICY).LockedBy
    assert holder is not None
    assert (
        state_store.acquire_slot(Slot(holder, "o-1", T0, T0 - SLOT_GRACE), limit=CAP) is SlotOutcome.GRANTED
    )
    assert claim_one(state_store, clock, POLICY, stored, max_in_flight=CAP) is None  # it may still write
    assert claim_pending(state_store, clock, POLICY, max_in_flight=CAP, batch_size=CAP).claims == []
    clock.advance(SLOT_GRACE + timedelta(seconds=1))
    claimed = claim_pending(state_store, clock, POLICY, max_in_flight=CAP, batch_size=CAP).claims
    assert [c.instance_id for c in claimed] == [holder]
    assert len(state_store.slots_acquired()) == 1  # taken over, not added


def test_a_record_locked_before_the_cap_existed_holds_a_slot(state_store: StateStore) -> None:
    state_store.create_if_absent(processing("busy", T0))
    stored = state_store.create_if_absent(pending("o-1", T0)).stored
    assert claim_one(state_store, ManualClock(T0), POLICY, stored, max_in_flight=1) is None


def test_a_second_claimer_of_one_attempt_leaves_the_winners_slot(state_store: StateStore) -> None:
    """Both compute the same instance ID: the one that finds its slot held moves on without
    freeing it, so the winner's attempt still counts."""
    stored = state_store.create_if_absent(pending("o-1", T0)).stored
    holder = transitions.claim(stored.record, now=T0, policy=POLICY).LockedBy
    assert holder is not None
    slot = Slot(holder, "o-1", T0, T0 - SLOT_GRACE)
    assert state_store.acquire_slot(slot, limit=2) is SlotOutcome.GRANTED
    assert state_store.acquire_slot(slot, limit=2) is SlotOutcome.HELD
    state_store.release_slot(holder)
    assert state_store.acquire_slot(slot, limit=2) is SlotOutcome.GRANTED
    assert claim_one(state_store, ManualClock(T0), POLICY, stored, max_in_flight=2) is None  # held


def _process_claimer(path: str, first: int, ready: Any, won: Any) -> None:
    states = SqliteStateStore(path)
    clock = ManualClock(T0)
    ready.wait()
    won.put(sum(_claim_as(i % 3, states, clock, first + i) for i in range(CAP)))
    states.close()


def test_worker_processes_claiming_one_embedded_store_never_pass_the_cap(tmp_path: Path) -> None:
    """As devhost's worker processes do: each its own connections to one SQLite file."""
    path = str(tmp_path / "state.db")
    states = SqliteStateStore(path)
    for n in range(ORDERS):
        states.create_if_absent(pending(f"o-{n:03}", T0))
    workers = 4
    context = multiprocessing.get_context("spawn")
    ready, results = context.Barrier(workers), context.Queue()
    processes = [
        context.Process(target=_process_claimer, args=(path, w * CAP, ready, results)) for w in range(workers)
    ]
    for process in processes:
        process.start()
    won = sum(results.get(timeout=60) for _ in processes)
    for process in processes:
        process.join()
    assert won == CAP
    assert _locked(states) == CAP
    states.close()
