"""Fenced writes from this process's copy of the record (E5): no read when the copy is current,
and never a wrong decision when another writer has made it stale."""

from dataclasses import replace
from datetime import datetime

from domain import transitions
from domain.policy import SchedulerPolicy
from domain.ports import Stored
from domain.record import StateRecord
from services.fenced import fenced_update
from services.record_cache import RecordCache
from tests.support.records import processing
from tests.support.stores import Stores

T0 = datetime.fromisoformat("2026-03-01T09:00:00+00:00")
POLICY = SchedulerPolicy()


class CountingReads:
    def __init__(self, stores: Stores) -> None:
        self.inner = stores.states
        self.reads = 0

    def get(self, order_id: str) -> Stored | None:
        self.reads += 1
        return self.inner.get(order_id)

    def replace(self, record: StateRecord, etag: str) -> Stored:
        return self.inner.replace(record, etag)


def begin(instance: str):  # type: ignore[no-untyped-def]
    return lambda r: (
        transitions.begin_step(r, instance=instance, step="Reserve", now=T0, policy=POLICY).record
    )


def claimed(stores: Stores) -> Stored:
    created = stores.states.create_if_absent(processing("o-1", T0))
    return created.stored


def test_a_current_copy_saves_the_read_and_the_written_record_is_kept(stores: Stores) -> None:
    cache, states = RecordCache(), CountingReads(stores)
    cache.remember(claimed(stores))
    record = fenced_update(states, "o-1", begin("o-1-1"), cache=cache)  # type: ignore[arg-type]
    assert record is not None and record.CurrentStep == "Reserve"
    assert states.reads == 0
    kept = cache.recall("o-1")
    assert kept is not None and kept == stores.states.get("o-1")  # the new ETag too


def test_a_stale_copy_loses_the_conditional_write_and_the_fresh_read_decides(stores: Stores) -> None:
    """Another writer (here the Supervisor's recovery to Pending) wrote after the copy: the
    copy lets the transition through, its ETag fails, the re-read fences this attempt out."""
    cache, states = RecordCache(), CountingReads(stores)
    stale = claimed(stores)
    cache.remember(stale)
    later = T0.replace(hour=10)
    recovered = transitions.recover_expired(
        stale.record, expected_locked_by="o-1-1", now=later, policy=POLICY.recovery
    )
    stores.states.replace(recovered.record, stale.etag)
    assert fenced_update(states, "o-1", begin("o-1-1"), cache=cache) is None  # type: ignore[arg-type]
    assert states.reads == 1
    assert stores.states.get("o-1").record.ProcessState.value == "Pending"  # type: ignore[union-attr]


def test_a_stale_copy_that_says_fenced_out_is_checked_on_a_fresh_read(stores: Stores) -> None:
    """A copy that would refuse the transition is never believed without a read."""
    cache, states = RecordCache(), CountingReads(stores)
    current = claimed(stores)
    cache.remember(Stored(record=replace(current.record, LockedBy="o-1-9"), etag=current.etag))
    record = fenced_update(states, "o-1", begin("o-1-1"), cache=cache)  # type: ignore[arg-type]
    assert record is not None and record.CurrentStep == "Reserve" and states.reads == 1


def test_the_cache_is_bounded_least_recently_used_first() -> None:
    cache = RecordCache(capacity=2)
    stored = {n: Stored(record=processing(f"o-{n}", T0), etag=f"e-{n}") for n in range(3)}
    cache.remember(stored[0])
    cache.remember(stored[1])
    cache.recall("o-0")
    cache.remember(stored[0])  # used again: o-1 is now the oldest
    cache.remember(stored[2])
    assert (
        cache.recall("o-1") is None and cache.recall("o-0") == stored[0] and cache.recall("o-2") == stored[2]
    )
    cache.forget("o-0")
    assert cache.recall("o-0") is None
