"""What an operator sees of an outage in the state records: how many orders wait on each
dependency (issue 37). One read model for ``ops watch`` and the local page (``ops dashboard``).

An order waits on a dependency while its record names it in ``Unavailable``: an activity's
retries ran out on it, or the Supervisor held the expired attempt for it (``domain.outage``),
until the next claim clears it.
"""

from collections import Counter
from dataclasses import dataclass

from domain.ports import StateStore
from domain.states import ProcessState

# Where a waiting order is: held back to Pending, or an attempt whose activities gave up.
WAITING_STATES = (ProcessState.PENDING, ProcessState.PROCESSING, ProcessState.COMPENSATING)


@dataclass(frozen=True)
class Waiting:
    """Orders waiting on each dependency, among the records read: ``complete`` False when a
    state held more than the limit, so the counts are a floor, not the total."""

    by_dependency: dict[str, int]
    complete: bool


def waiting_on(states: StateStore, limit: int) -> Waiting:
    """At most ``limit`` records per state are read: an operator's view, not a per-order path."""
    counts: Counter[str] = Counter()
    complete = True
    for state in WAITING_STATES:
        found = states.query_in_state(state, limit)
        complete = complete and len(found) < limit
        counts.update(s.record.Unavailable for s in found if s.record.Unavailable)
    return Waiting(dict(sorted(counts.items())), complete)
