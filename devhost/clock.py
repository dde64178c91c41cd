"""The one clock that drives durable timers, NCRONTAB schedules, message visibility and the
orchestrations' ``current_utc_datetime``.

``VirtualClock`` only moves when the host is idle and jumps straight to the next thing that is
due, so a test with a 30-minute timer runs in milliseconds.
"""

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    virtual = False

    def now(self) -> datetime:
        return datetime.now(UTC)


class VirtualClock:
    virtual = True

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance_to(self, moment: datetime) -> None:
        with self._lock:
            self._now = max(self._now, moment)

    def advance(self, delta: timedelta) -> None:
        if delta < timedelta(0):
            raise ValueError("time does not go backwards")
        with self._lock:
            self._now += delta


_current: Clock = SystemClock()


def current_clock() -> Clock:
    """The clock of the host running in this process, so code under it can share its time."""
    return _current


def set_current_clock(clock: Clock) -> None:
    global _current  # noqa: PLW0603 - one host per process owns the process's clock
    _current = clock
