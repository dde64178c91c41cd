"""The one clock that drives durable timers, NCRONTAB schedules, message visibility and the
orchestrations' ``current_utc_datetime``.

``VirtualClock`` only moves when the host is idle and jumps straight to the next thing that is
due, so a test with a 30-minute timer runs in milliseconds. The app must read the same time:
in-process it is handed this clock (``adapters.clock.use_host_clock``); in worker processes the
clock publishes every move to a shared file (``share``) that the proxy worker hands the app
through the same hook (``harness/devhost/proxy_worker.py``, ``SharedFileClock``).
"""

import mmap
import struct
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

from adapters.clock import ManualClock, SystemClock
from harness.devhost.proxy_worker import CLOCK_LAYOUT, EPOCH

SEQUENCE, MICROS = struct.Struct("<Q"), struct.Struct("<q")


class HostClock(Protocol):
    """The clock a host runs on, which its engine, timers and bus read: a ``VirtualClock`` in
    tests, a ``SystemClock`` otherwise. devhost's own: it knows nothing of the app's ports, and
    the app's clock protocol asks no more than this."""

    def now(self) -> datetime: ...


class VirtualClock(ManualClock):
    def __init__(self, start: datetime | None = None) -> None:
        super().__init__(start)
        self._shared: mmap.mmap | None = None
        self._sequence = 0

    def share(self, path: Path) -> Path:
        """Publish this clock to ``path`` from now on, for processes that read it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(bytes(CLOCK_LAYOUT.size))
        with path.open("r+b") as file:
            self._shared = mmap.mmap(file.fileno(), CLOCK_LAYOUT.size)
        self._publish()
        return path

    def _publish(self) -> None:
        if self._shared is None:
            return
        micros = (self.now() - EPOCH) // timedelta(microseconds=1)
        # seqlock: odd while writing, so a reader never takes half of an update.
        self._sequence += 1
        SEQUENCE.pack_into(self._shared, 0, self._sequence)
        MICROS.pack_into(self._shared, SEQUENCE.size, micros)
        self._sequence += 1
        SEQUENCE.pack_into(self._shared, 0, self._sequence)

    def advance(self, delta: timedelta) -> datetime:
        moved = super().advance(delta)
        self._publish()
        return moved

    def advance_to(self, moment: datetime) -> None:
        super().advance_to(moment)
        self._publish()


__all__ = ["HostClock", "SystemClock", "VirtualClock"]
