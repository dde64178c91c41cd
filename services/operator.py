"""Operator actions on a state record (E12): resubmit an Error order, or have it compensated."""

from collections.abc import Callable

from domain import transitions
from domain.errors import PreconditionFailed, RecordNotFound
from domain.ports import Clock, StateStore
from domain.record import StateRecord

MAX_RACES = 5


def _apply(states: StateStore, order_id: str, move: Callable[[StateRecord], StateRecord]) -> StateRecord:
    for _ in range(MAX_RACES):
        stored = states.get(order_id)
        if stored is None:
            raise RecordNotFound(f"no order {order_id}")
        try:
            return states.replace(move(stored.record), stored.etag).record
        except PreconditionFailed:
            continue
    raise PreconditionFailed(f"order {order_id} kept changing; try again")


def resubmit(states: StateStore, clock: Clock, order_id: str) -> StateRecord:
    """Error → Pending, resuming at the failed step; the starter picks it up (E12)."""
    return _apply(states, order_id, lambda r: transitions.resubmit(r, now=clock.now()))


def request_compensation(states: StateStore, clock: Clock, order_id: str) -> StateRecord:
    """Error or CompensationFailed → Pending, to be claimed into Compensating (R9, C8)."""
    return _apply(states, order_id, lambda r: transitions.request_compensation(r, now=clock.now()))
