"""Retry-After from the measured drain (C3, issues 40 and 51): the first refusal of a burst already
says when to come back from the claims' pace; once measured, the backlog's own drain, leaving out
the slots' filling; and the room a Retry-After promises is kept for the caller it was told to."""

from datetime import timedelta
from pathlib import Path

from adapters.clock import ManualClock
from adapters.sqlite.state_store import SqliteStateStore
from domain import transitions
from domain.policy import SchedulerPolicy
from domain.ports import Slot
from services.admission import Admission
from tests.support.clock import T0
from tests.support.records import pending

THRESHOLD = 20
FALLBACK = 7  # the configured Retry-After, longer than the 5 s between reads
READS_EVERY = timedelta(seconds=5)


def _admission(states: SqliteStateStore, clock: ManualClock) -> Admission:
    return Admission(states, None, clock, queue="orders", cache=READS_EVERY)


def _pending(states: SqliteStateStore, count: int) -> None:
    for n in range(count):
        states.create_if_absent(pending(f"o-{n:03}", T0))


def _claim(states: SqliteStateStore, *order_ids: str) -> None:
    for order_id in order_ids:
        stored = states.get(order_id)
        assert stored is not None
        states.replace(transitions.claim(stored.record, now=T0, policy=SchedulerPolicy()), stored.etag)


def test_the_first_refusal_reads_the_drain_off_the_in_flight_slots(tmp_path: Path) -> None:
    states = SqliteStateStore(tmp_path / "state.db")
    clock = ManualClock(T0)
    # 20 slots taken one every 100 ms, as attempts of T = 2 s end and hand theirs over: 10/s.
    for n in range(20):
        states.acquire_slot(Slot(f"a-{n}", f"s-{n}", clock.now(), clock.now()), limit=20)
        clock.advance(timedelta(milliseconds=100))
    _pending(states, THRESHOLD + 99)
    admission = _admission(states, clock)  # its first read: this process has measured no drain
    refusal = admission.refusal("new", THRESHOLD, FALLBACK)
    assert refusal is not None
    assert refusal.retry_after == 10  # 100 over ÷ 10/s, and a read is due then
    states.close()


def test_with_nothing_in_flight_the_fallback_is_all_there_is(tmp_path: Path) -> None:
    states = SqliteStateStore(tmp_path / "state.db")
    _pending(states, THRESHOLD + 99)
    refusal = _admission(states, ManualClock(T0)).refusal("new", THRESHOLD, FALLBACK)
    assert refusal is not None and refusal.retry_after == FALLBACK
    states.close()


def test_the_backlogs_own_drain_wins_once_measured(tmp_path: Path) -> None:
    states = SqliteStateStore(tmp_path / "state.db")
    clock = ManualClock(T0)
    states.acquire_slot(Slot("a", "s", T0 - timedelta(seconds=1), T0), limit=1)  # would say 1/11 s
    _pending(states, 60)
    admission = _admission(states, clock)
    admission.backlog()
    clock.advance(timedelta(seconds=10))
    _claim(states, *(f"o-{n:03}" for n in range(20)))  # 20 of the 60 left Pending in 10 s: 2/s
    refusal = admission.refusal("new", THRESHOLD, FALLBACK)
    assert refusal is not None
    # 40 waiting, 21 over: 10.5 s at 2/s, so the read 15 s from now (the slot would say minutes).
    assert refusal.retry_after == 15
    states.close()


def test_a_caller_back_at_its_time_finds_its_room_kept(tmp_path: Path) -> None:
    states = SqliteStateStore(tmp_path / "state.db")
    clock = ManualClock(T0)
    _pending(states, THRESHOLD)
    admission = _admission(states, clock)
    told = [admission.refusal(caller, THRESHOLD, FALLBACK) for caller in ("a", "b")]
    assert [r.retry_after if r else None for r in told] == [FALLBACK, FALLBACK]
    assert [r.promised if r else None for r in told] == [0, 1]  # b was told after a
    clock.advance(timedelta(seconds=3))
    early = admission.refusal("b", THRESHOLD, FALLBACK)  # early: refused, its time unchanged
    assert early is not None and early.retry_after == FALLBACK - 3
    clock.advance(timedelta(seconds=FALLBACK - 3))
    _claim(states, "o-000", "o-001")  # room for two: the two callers told to come back now
    newcomer = admission.refusal("n", THRESHOLD, FALLBACK)
    assert newcomer is not None and newcomer.promised == 2 and newcomer.backlog.total == THRESHOLD - 2
    for caller in ("a", "b"):
        assert admission.refusal(caller, THRESHOLD, FALLBACK) is None
        admission.admitted(caller)
    states.close()
