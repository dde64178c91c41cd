"""Retry-After from the measured drain (C3, issue 40): the first refusal of a burst already says
when to come back from the claims' pace, not the configured fallback."""

from datetime import timedelta
from pathlib import Path

from adapters.clock import ManualClock
from adapters.sqlite.state_store import SqliteStateStore
from domain import transitions
from domain.admission import Backlog
from domain.policy import SchedulerPolicy
from domain.ports import Slot
from services.admission import Admission
from tests.support.clock import T0
from tests.support.records import pending

THRESHOLD = 500
FALLBACK = 5


def _admission(states: SqliteStateStore, clock: ManualClock) -> Admission:
    return Admission(states, None, clock, queue="orders", cache=timedelta(seconds=5))


def test_the_first_refusal_reads_the_drain_off_the_in_flight_slots(tmp_path: Path) -> None:
    states = SqliteStateStore(tmp_path / "state.db")
    clock = ManualClock(T0)
    # 20 slots taken one every 100 ms, as attempts of T = 2 s end and hand theirs over: 10/s.
    for n in range(20):
        states.acquire_slot(Slot(f"a-{n}", f"o-{n}", clock.now(), clock.now()), limit=20)
        clock.advance(timedelta(milliseconds=100))
    admission = _admission(states, clock)
    backlog = admission.backlog()  # the first read: this process has measured no drain yet
    over = Backlog(queued=backlog.queued, pending=THRESHOLD + 99)
    assert admission.retry_after(over, THRESHOLD, FALLBACK) == 10  # 100 over ÷ 10/s
    states.close()


def test_with_nothing_in_flight_the_fallback_is_all_there_is(tmp_path: Path) -> None:
    states = SqliteStateStore(tmp_path / "state.db")
    admission = _admission(states, ManualClock(T0))
    assert admission.retry_after(Backlog(0, THRESHOLD + 99), THRESHOLD, FALLBACK) == FALLBACK
    states.close()


def test_the_backlogs_own_drain_wins_once_measured(tmp_path: Path) -> None:
    states = SqliteStateStore(tmp_path / "state.db")
    clock = ManualClock(T0)
    states.acquire_slot(Slot("a", "o", T0 - timedelta(seconds=1), T0), limit=1)  # would say 1/s
    admission = _admission(states, clock)
    for n in range(30):
        states.create_if_absent(pending(f"o-{n:03}", T0))
    admission.backlog()
    clock.advance(timedelta(seconds=10))
    for n in range(20):  # 20 of the 30 left Pending in 10 s: 2/s
        stored = states.get(f"o-{n:03}")
        assert stored is not None
        states.replace(transitions.claim(stored.record, now=T0, policy=SchedulerPolicy()), stored.etag)
    admission.backlog()
    assert admission.retry_after(Backlog(0, THRESHOLD + 19), THRESHOLD, FALLBACK) == 10  # 20 ÷ 2/s
    states.close()
