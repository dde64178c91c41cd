"""Timing and retry policy of the Scheduler and the Supervisor (R7, C2, C3, C9)."""

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class RecoveryPolicy:
    """The Supervisor's two-tier retry policy for a step whose CompleteBy expired (R7, E15).

    The first ``quick_retries`` expiries of a step go straight back to Pending; the next
    ``extended_retries`` go back to Pending with ``NotBefore = now + cooldown``, so a fault
    that lasts minutes can clear; the expiry after that gives up (Error, or
    CompensationFailed for a compensation) and alerts an operator.
    """

    quick_retries: int = 2
    extended_retries: int = 2
    cooldown: timedelta = timedelta(minutes=5)
    # An expiry put down to an outage is not counted (``domain.outage``): while the dependency
    # is down, the next uncounted try waits this long after the expiry, doubling per hold, at
    # most ``cooldown``.
    outage_wait_first: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        if self.quick_retries < 0 or self.extended_retries < 0:
            raise ValueError("retry counts must not be negative")
        if self.cooldown <= timedelta(0):
            raise ValueError("cooldown must be positive")
        if self.outage_wait_first <= timedelta(0):
            raise ValueError("outage_wait_first must be positive")

    def outage_wait(self, holds: int) -> timedelta:
        """How long after an expiry the next uncounted try starts, after ``holds`` before it."""
        grown: timedelta = self.outage_wait_first * 2 ** min(holds, 32)
        return min(grown, max(self.cooldown, self.outage_wait_first))

    @property
    def max_attempts_per_step(self) -> int:
        """How many times one step can be started: the first run plus every retry."""
        return 1 + self.quick_retries + self.extended_retries


@dataclass(frozen=True)
class SchedulerPolicy:
    """Everything that bounds time and work per order. Defaults suit the demo."""

    # Between a claim (or a finished step) and the next step's own CompleteBy: covers the
    # starter dying between the claim and start_new, and an orchestration lost between steps.
    start_grace: timedelta = timedelta(seconds=60)
    step_timeout: timedelta = timedelta(seconds=30)
    # End-to-end budget of remote calls per step, owned by the Scheduler (C2).
    max_calls_per_step: int = 30
    recovery: RecoveryPolicy = RecoveryPolicy()

    def __post_init__(self) -> None:
        if self.start_grace <= timedelta(0) or self.step_timeout <= timedelta(0):
            raise ValueError("start_grace and step_timeout must be positive")
        # Durable timers have a maximum length (six days on older backends): keep every
        # CompleteBy far below it.
        if max(self.start_grace, self.step_timeout) > timedelta(days=1):
            raise ValueError("start_grace and step_timeout must be at most one day")
        if self.max_calls_per_step < 1:
            raise ValueError("max_calls_per_step must be at least 1")


@dataclass(frozen=True)
class SupervisorScan:
    """Bounds of one Supervisor run (E13, C9)."""

    lookback: timedelta = timedelta(days=7)
    page_size: int = 100
    max_per_run: int = 500

    def __post_init__(self) -> None:
        if self.page_size < 1 or self.max_per_run < 1:
            raise ValueError("page_size and max_per_run must be at least 1")
        if self.lookback <= timedelta(0):
            raise ValueError("lookback must be positive")


@dataclass(frozen=True)
class Postponement:
    """When a message whose dependencies are down comes back: ``first``, doubling up to
    ``maximum``, at most ``limit`` times. Service Bus redelivers an abandoned message at once,
    so without this an outage of seconds would use up MaxDeliveryCount and dead-letter it.
    ``maximum`` bounds how long a copy waits after the dependency is back: one Supervisor
    period by default, so recovery starts within it; ``limit`` keeps the horizon over an hour."""

    first: timedelta = timedelta(seconds=5)
    maximum: timedelta = timedelta(seconds=30)
    limit: int = 150

    def __post_init__(self) -> None:
        if self.first <= timedelta(0) or self.maximum < self.first or self.limit < 0:
            raise ValueError("need 0 < first <= maximum and limit >= 0")

    def delay(self, postponed: int) -> timedelta | None:
        """How long until the next try of a message postponed ``postponed`` times before; None
        when it has used up the limit."""
        if postponed >= self.limit:
            return None
        grown: timedelta = self.first * 2 ** min(postponed, 32)
        return min(grown, self.maximum)

    @property
    def horizon(self) -> timedelta:
        """The longest outage a message rides out: the sum of every delay."""
        return sum((self.delay(n) or timedelta(0) for n in range(self.limit)), timedelta(0))
