"""Which expiries are an outage's and not the order's (R7), as pure functions.

The Supervisor counts an expired attempt against its order only when the order could have
failed on its own. An attempt is put down to an outage when either

- its record says so: its last write was ``transitions.note_unavailable``, made by an activity
  whose retries ran out on ``DependencyUnavailable`` while the state store still answered; or
- the Supervisor's own process saw a dependency unavailable during the attempt's life, from its
  last write (``UpdatedAt``) to its deadline (``CompleteBy``). This covers the state store, which
  cannot carry a note about itself: the Supervisor's own scans and writes failed meanwhile.

Such an attempt is held, not counted: left as it is while the dependency is known to be down,
with back-off between uncounted tries, and sent back to Pending at once when the dependency
is seen answering again.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from domain.policy import RecoveryPolicy
from domain.record import StateRecord


@dataclass(frozen=True)
class OutageWindow:
    """A dependency was unavailable from ``since`` (the first call that gave up) to ``until``
    (the first call that succeeded after), as one process saw it; ``until`` None: down now."""

    dependency: str
    since: datetime
    until: datetime | None = None

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return self.since <= end and (self.until is None or self.until >= start)


def excusing_outage(record: StateRecord, windows: Iterable[OutageWindow]) -> str | None:
    """The dependency whose outage ended this expired attempt, or None: the order's own failure."""
    if record.Unavailable is not None:
        return record.Unavailable
    if record.CompleteBy is None:
        return None
    for window in windows:
        if window.overlaps(record.UpdatedAt, record.CompleteBy):
            return window.dependency
    return None


def hold_until(
    record: StateRecord, dependency: str, windows: Iterable[OutageWindow], policy: RecoveryPolicy
) -> datetime:
    """When an expired attempt put down to ``dependency`` goes back to Pending, uncounted.

    At its expiry (so: now) once this process has seen the dependency answer again since the
    attempt's last write. Otherwise, while it is down or this process cannot tell, after a
    back-off from the expiry that grows with each such hold: the next attempt is the probe.
    """
    assert record.CompleteBy is not None, "only an expired, locked record is held"
    seen = [w for w in windows if w.dependency == dependency]
    down = any(w.until is None for w in seen)
    back = not down and any(w.until is not None and w.until >= record.UpdatedAt for w in seen)
    if back:
        return record.CompleteBy
    return record.CompleteBy + policy.outage_wait(record.OutageHolds)
