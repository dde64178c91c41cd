"""Builders of state records in a given state, made only through the real transitions."""

from datetime import datetime, timedelta

from domain import transitions
from domain.policy import SchedulerPolicy
from domain.record import StateRecord


def pending(order_id: str, now: datetime, policy: SchedulerPolicy | None = None) -> StateRecord:
    return transitions.create(
        order_id,
        status_queue="status-app-a",
        order_hash="0" * 64,
        now=now,
        policy=policy or SchedulerPolicy(),
    )


def processing(order_id: str, claimed_at: datetime, policy: SchedulerPolicy | None = None) -> StateRecord:
    """Claimed at ``claimed_at``: CompleteBy = claimed_at + start grace."""
    policy = policy or SchedulerPolicy()
    return transitions.claim(pending(order_id, claimed_at, policy), now=claimed_at, policy=policy)


def expired(order_id: str, now: datetime, ago: timedelta = timedelta(minutes=1)) -> StateRecord:
    """Processing, with a CompleteBy ``ago`` before ``now``."""
    policy = SchedulerPolicy()
    return processing(order_id, now - ago - policy.start_grace, policy)
