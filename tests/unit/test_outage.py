"""Which expiries are an outage's, not the order's (domain.outage), and the moves that go with
them (transitions.note_unavailable, hold_for_outage)."""

from dataclasses import replace
from datetime import timedelta

import pytest

from domain import transitions
from domain.errors import FencedOut
from domain.outage import OutageWindow, excusing_outage, hold_until
from domain.policy import RecoveryPolicy, SchedulerPolicy
from domain.record import StateRecord, from_document, to_document
from domain.states import ProcessState
from domain.transitions import RecoveryOutcome
from tests.support.clock import T0
from tests.support.records import processing

POLICY = SchedulerPolicy()
RECOVERY = RecoveryPolicy(cooldown=timedelta(minutes=5), outage_wait_first=timedelta(seconds=30))
SQL = "orders database"


def claimed() -> StateRecord:
    return processing("o-1", T0)  # CompleteBy = T0 + start grace (60 s)


def test_a_note_names_the_dependency_and_the_next_transition_clears_it() -> None:
    record = claimed()
    noted = transitions.note_unavailable(record, instance=record.LockedBy or "", dependency=SQL, now=T0)
    assert noted.Unavailable == SQL and noted.FailureCount == 0
    assert excusing_outage(noted, []) == SQL
    begun = transitions.begin_step(
        noted, instance=record.LockedBy or "", step="ReserveStock", now=T0, policy=POLICY
    ).record
    assert begun.Unavailable is None
    assert excusing_outage(begun, []) is None  # the attempt moved on: its own expiry counts


def test_a_note_is_fenced() -> None:
    record = claimed()
    with pytest.raises(FencedOut):
        transitions.note_unavailable(record, instance="o-1-9", dependency=SQL, now=T0)


def test_the_note_and_the_hold_count_survive_the_stored_document() -> None:
    record = claimed()
    noted = transitions.note_unavailable(record, instance=record.LockedBy or "", dependency=SQL, now=T0)
    assert from_document(to_document(noted)) == noted
    old = {k: v for k, v in to_document(record).items() if k not in ("Unavailable", "OutageHolds")}
    assert from_document(old) == record  # written before these fields: no note, no holds


def test_an_outage_seen_during_the_attempts_life_excuses_its_expiry() -> None:
    record = claimed()  # alive from T0 to T0 + 60 s
    during = OutageWindow("state store", T0 + timedelta(seconds=30), T0 + timedelta(minutes=30))
    before = OutageWindow("state store", T0 - timedelta(hours=1), T0 - timedelta(seconds=1))
    after = OutageWindow("state store", T0 + timedelta(seconds=61))
    assert excusing_outage(record, [during]) == "state store"
    assert excusing_outage(record, [OutageWindow("state store", T0 - timedelta(hours=1))]) == "state store"
    assert excusing_outage(record, [before, after]) is None  # the order's own expiry


def test_while_the_dependency_is_down_the_next_uncounted_try_backs_off() -> None:
    record = claimed()
    expiry = record.CompleteBy
    assert expiry is not None
    down = [OutageWindow(SQL, T0)]
    waits = [hold_until(replace(record, OutageHolds=holds), SQL, down, RECOVERY) for holds in range(6)]
    assert [w - expiry for w in waits] == [timedelta(seconds=s) for s in (30, 60, 120, 240, 300, 300)]
    # A process that never saw the dependency cannot tell: it backs off the same way.
    assert hold_until(record, SQL, [], RECOVERY) == expiry + timedelta(seconds=30)


def test_once_the_dependency_is_seen_answering_again_the_hold_ends_at_once() -> None:
    record = claimed()
    back = [OutageWindow(SQL, T0, T0 + timedelta(minutes=30))]
    assert hold_until(record, SQL, back, RECOVERY) == record.CompleteBy
    # ... but not for an answer seen before this attempt's last write: that was another outage.
    earlier = [OutageWindow(SQL, T0 - timedelta(hours=2), T0 - timedelta(hours=1))]
    assert hold_until(record, SQL, earlier, RECOVERY) > (record.CompleteBy or T0)


def test_a_hold_goes_back_to_pending_without_counting_a_failure() -> None:
    record = claimed()
    now = T0 + timedelta(minutes=2)
    held = transitions.hold_for_outage(
        record, expected_locked_by=record.LockedBy or "", now=now, dependency=SQL
    )
    assert held.outcome is RecoveryOutcome.HELD
    assert held.record.ProcessState is ProcessState.PENDING and held.record.NotBefore is None
    assert held.record.FailureCount == 0 and dict(held.record.StepFailures) == {}
    assert held.record.OutageHolds == 1 and held.record.Unavailable == SQL
    again = transitions.claim(held.record, now=now, policy=POLICY)
    assert again.Unavailable is None and again.OutageHolds == 1  # back-off state, until counted
    counted = transitions.recover_expired(
        again, expected_locked_by=again.LockedBy or "", now=now + timedelta(hours=1), policy=RECOVERY
    )
    assert counted.record.FailureCount == 1 and counted.record.OutageHolds == 0
