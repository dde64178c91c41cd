"""Clocks: the system clock, a manual one that tests and devhost's virtual time move, and the
clock of the host this process runs under.

The composition root (``bootstrap.build_ports``) takes its clock as an argument; the app's
entry point passes ``host_clock()``. That is the system clock, unless a host running the app in
this same process (devhost on virtual time, in tests) installed its own with ``use_host_clock``,
so the app's ``CompleteBy`` and the host's durable timers and message times agree. The Functions
programming model has no constructor to inject through, so this one registration point, owned by
the app and set only by a host, stands in for it.
"""

import threading
from datetime import UTC, datetime, timedelta

from domain.ports import Clock


class SystemClock:
    virtual = False

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to, so timing tests need no sleeps."""

    virtual = True

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta) -> datetime:
        if delta < timedelta(0):
            raise ValueError("time does not go backwards")
        with self._lock:
            self._now += delta
            return self._now

    def advance_to(self, moment: datetime) -> None:
        """Move to ``moment``; a moment already past leaves the clock where it is."""
        with self._lock:
            self._now = max(self._now, moment)


_host_clock: Clock = SystemClock()


def host_clock() -> Clock:
    """The clock of the host running this process: see the module docstring."""
    return _host_clock


def use_host_clock(clock: Clock) -> None:
    """Called by an in-process host before it loads the app."""
    global _host_clock  # noqa: PLW0603 - one host per process owns the process's clock
    _host_clock = clock
