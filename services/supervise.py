"""The Supervisor (E13-E15, R6-R7): bounded scans for expired work, recovered exactly once.

A run reads the ``CompleteBy`` window ``[now - lookback, now)`` page by page, following
continuation tokens, and stops at ``max_per_run`` records; it reports the store's cost of
every page (E13). Each recovery is a conditional replace on the ETag the scan read, which pins
the expired ``LockedBy``: of two Supervisors on one record exactly one wins (R10).

An expiry that an outage explains (``domain.outage``) is not counted against the order: the
record is left as it is while the dependency is known to be down (a back-off that grows with
each such hold), then sent back to Pending uncounted, at once when the dependency answers again.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from domain import transitions
from domain.errors import IllegalTransition, PreconditionFailed
from domain.outage import OutageWindow, excusing_outage, hold_until
from domain.policy import RecoveryPolicy, SupervisorScan
from domain.ports import Clock, StateStore, Stored
from domain.record import StateRecord
from domain.transitions import Recovery, RecoveryOutcome


@dataclass
class SupervisionReport:
    recovered: list[Recovery] = field(default_factory=list)  # back to Pending (now or later)
    # Back to Pending at once, uncounted: their attempts ended on an outage.
    held: list[Recovery] = field(default_factory=list)
    waiting: int = 0  # ended on an outage that is not over yet: left as they are, uncounted
    # Those back to Pending at once, as written (with their ETag): the next attempt may start now.
    restartable: list[Stored] = field(default_factory=list)
    gave_up: list[Recovery] = field(default_factory=list)  # Error / CompensationFailed: alert
    lost: int = 0  # records another writer changed first
    scanned: int = 0
    pages: int = 0
    cost: float = 0.0
    truncated: bool = False  # max_per_run reached with more expired records left


def supervise(
    states: StateStore,
    clock: Clock,
    policy: RecoveryPolicy,
    scan: SupervisorScan,
    on_gave_up: Callable[[Recovery, Stored], object] | None = None,
    *,
    outages: Callable[[], Sequence[OutageWindow]] = lambda: (),
) -> SupervisionReport:
    """``on_gave_up`` runs right after each give-up is written (with what was stored, to clear
    the record's ``NoticePending`` after telling), so that a later failure in the scan cannot
    cost an earlier order its notifications. ``outages``: the outages this process saw, open or
    recently ended (``services.outages.OutageMonitor.windows``)."""
    now = clock.now()
    windows = outages()
    report = SupervisionReport()
    token: str | None = None
    while report.scanned < scan.max_per_run:
        page = states.query_expired(
            now - scan.lookback,
            now,
            min(scan.page_size, scan.max_per_run - report.scanned),
            token,
        )
        report.pages += 1
        report.cost += page.cost
        report.scanned += len(page.items)
        for item in page.items:
            expired_by = item.record.LockedBy
            if expired_by is None:
                report.lost += 1
                continue
            try:
                recovery = _recovery(item.record, expired_by, now, policy, windows)
                if recovery is None:
                    report.waiting += 1
                    continue
                written = states.replace(recovery.record, item.etag)
            except (PreconditionFailed, IllegalTransition):
                report.lost += 1
                continue
            if recovery.outcome is RecoveryOutcome.HELD:
                report.held.append(recovery)
                report.restartable.append(written)
            elif recovery.outcome is RecoveryOutcome.GAVE_UP:
                report.gave_up.append(recovery)
                if on_gave_up is not None:
                    on_gave_up(recovery, written)
            else:
                report.recovered.append(recovery)
                if recovery.outcome is RecoveryOutcome.RETRY:
                    report.restartable.append(written)
            # The expired attempt's in-flight slot (C3), freed now: its record was locked by it,
            # so its claim write has landed, and no longer is. Left to SLOT_GRACE, every expired
            # attempt kept a slot for up to a minute, and under load they filled the cap.
            states.release_slot(expired_by)
        if page.continuation is None or (page.continuation == token and not page.items):
            # An empty page that hands back the token it was given would loop forever (the
            # open-source Cosmos server does this once a query's cursor is gone): end the run;
            # the next run starts afresh.
            token = None
            break
        token = page.continuation
    report.truncated = token is not None
    return report


def _recovery(
    record: StateRecord,
    expired_by: str,
    now: datetime,
    policy: RecoveryPolicy,
    windows: Sequence[OutageWindow],
) -> Recovery | None:
    """What to write for an expired record, or None: an outage explains it and is not over yet."""
    dependency = excusing_outage(record, windows)
    if dependency is None:
        return transitions.recover_expired(record, expected_locked_by=expired_by, now=now, policy=policy)
    if now < hold_until(record, dependency, windows, policy):
        return None
    return transitions.hold_for_outage(record, expected_locked_by=expired_by, now=now, dependency=dependency)
