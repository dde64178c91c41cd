"""Fenced writes (E5): read the record, apply a transition that checks ``LockedBy``, replace on
the ETag. A lost race re-reads and re-applies; a fenced-out attempt gets ``None`` and ends quietly."""

import logging
from collections.abc import Callable

from domain.errors import DomainError, FencedOut, PreconditionFailed
from domain.ports import StateStore, Stored
from domain.record import StateRecord
from services import telemetry
from services.record_cache import RecordCache

log = logging.getLogger("sas.fenced")

MAX_RACES = 5


def fenced_update(
    states: StateStore,
    order_id: str,
    transition: Callable[[StateRecord], StateRecord],
    *,
    snapshot: Stored | None = None,
    cache: RecordCache | None = None,
) -> StateRecord | None:
    """``snapshot``: a read the caller already made; it saves a read when nobody wrote since.
    ``cache``: start from this process's last copy of the record, and keep the written one."""
    written = fenced_write(states, order_id, transition, snapshot=snapshot, cache=cache)
    return None if written is None else written.record


def fenced_write(
    states: StateStore,
    order_id: str,
    transition: Callable[[StateRecord], StateRecord],
    *,
    snapshot: Stored | None = None,
    cache: RecordCache | None = None,
) -> Stored | None:
    """``fenced_update``, answering with the record as stored (its ETag: for a next write)."""
    # A cached copy may be stale: whatever it makes the transition decide (fenced out, no
    # budget left) is checked again on a fresh read; what it lets through, the ETag checks.
    from_cache = snapshot is None and cache is not None and (snapshot := cache.recall(order_id)) is not None
    for _ in range(MAX_RACES):
        stored, snapshot = snapshot or states.get(order_id), None
        if stored is None:
            log.warning("order %s has no state record", order_id)
            return None
        try:
            updated = transition(stored.record)
        except DomainError as refused:
            if from_cache:
                from_cache = False
                continue
            if isinstance(refused, FencedOut):
                log.info("fenced out, ending quietly: %s", refused)
                return None
            raise
        from_cache = False
        try:
            written = states.replace(updated, stored.etag)
        except PreconditionFailed:
            if cache is not None:
                cache.forget(order_id)
            snapshot = states.get(order_id)
            if snapshot is not None and snapshot.record == updated:
                # Our own write, repeated after its answer was lost (a retried call): it landed.
                written = snapshot
            else:
                continue  # another writer got there first: the fence decides again on this read
        if cache is not None:
            cache.remember(written)
        if written.record.ProcessState is not stored.record.ProcessState:
            telemetry.transitions.add(1, {"to_state": written.record.ProcessState.value})
        return written
    raise PreconditionFailed(f"order {order_id}: {MAX_RACES} conditional writes lost in a row")
