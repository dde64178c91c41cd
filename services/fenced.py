"""Fenced writes (E5): read the record, apply a transition that checks ``LockedBy``, replace on
the ETag. A lost race re-reads and re-applies; a fenced-out attempt gets ``None`` and ends quietly."""

import logging
from collections.abc import Callable

from domain.errors import FencedOut, PreconditionFailed
from domain.ports import StateStore, Stored
from domain.record import StateRecord
from services import telemetry

log = logging.getLogger("sas.fenced")

MAX_RACES = 5


def fenced_update(
    states: StateStore,
    order_id: str,
    transition: Callable[[StateRecord], StateRecord],
    *,
    snapshot: Stored | None = None,
) -> StateRecord | None:
    """``snapshot``: a read the caller already made; it saves a read when nobody wrote since."""
    for _ in range(MAX_RACES):
        stored, snapshot = snapshot or states.get(order_id), None
        if stored is None:
            log.warning("order %s has no state record", order_id)
            return None
        try:
            updated = transition(stored.record)
        except FencedOut as fenced:
            log.info("fenced out, ending quietly: %s", fenced)
            return None
        try:
            written = states.replace(updated, stored.etag).record
        except PreconditionFailed:
            continue  # another writer got there first: re-read, and the fence decides again
        if written.ProcessState is not stored.record.ProcessState:
            telemetry.transitions.add(1, {"to_state": written.ProcessState.value})
        return written
    raise PreconditionFailed(f"order {order_id}: {MAX_RACES} conditional writes lost in a row")
