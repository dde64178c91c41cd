"""Admission control (C3): how big the backlog is, and when a refused submitter should come back.

The backlog is what waits to be worked on: the orders queue's active messages (posted, not yet
taken by the submission function) plus the Pending records (stored, not yet claimed). Counting
only the records misses a fast burst, which sits in the queue.

``Retry-After`` comes from the rate this process has seen the backlog drain at: the time the
excess over the threshold takes to drain, so a submitter that honours it arrives as room opens.
Until this process has seen the backlog drain for a second (the first refusals of a burst), the
rate is read off the in-flight slots instead: at the cap every slot was taken within the last
attempt's duration T, so slots held ÷ the oldest slot's age is the drain cap ÷ T (issue 40).
"""

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# A submitter told to wait longer than this would rather look again: the rate may pick up.
MAX_RETRY_AFTER_SECONDS = 60


@dataclass(frozen=True)
class Backlog:
    queued: int  # active messages on the orders queue
    pending: int  # Pending state records

    @property
    def total(self) -> int:
        return self.queued + self.pending


@dataclass
class DrainMeter:
    """The backlog's drain rate from samples of (time, backlog, submissions admitted so far).

    What left the backlog between two samples is what came in minus how much it grew. Only this
    process's admissions are known, so with several instances the rate is underestimated, and
    ``Retry-After`` errs long: the safe side."""

    window: timedelta = timedelta(seconds=30)
    _samples: deque[tuple[datetime, int, int]] = field(default_factory=deque)

    def observe(self, now: datetime, backlog: int, admitted: int) -> None:
        self._samples.append((now, backlog, admitted))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def rate(self) -> float | None:
        """Orders per second that left the backlog over the window, or None before there is a
        measurement (less than a second of samples, or no drain seen)."""
        if len(self._samples) < 2:
            return None
        (t0, backlog0, admitted0), (t1, backlog1, admitted1) = self._samples[0], self._samples[-1]
        seconds = (t1 - t0).total_seconds()
        if seconds < 1:
            return None
        drained = (admitted1 - admitted0) - (backlog1 - backlog0)
        return drained / seconds if drained > 0 else None


# Slots younger than this say nothing about T yet (the first wave of a burst is claimed at once).
MIN_SLOT_AGE = timedelta(milliseconds=100)


def drain_from_slots(acquired: Sequence[datetime], now: datetime) -> float | None:
    """Orders per second the claims move at, from when each held slot was taken: ``len`` ÷ the
    oldest one's age. A slot kept by a stuck attempt makes it lower, so Retry-After errs long.
    None with no slot, or only very young ones."""
    if not acquired:
        return None
    age = now - min(acquired)
    if age < MIN_SLOT_AGE:
        return None
    return len(acquired) / age.total_seconds()


def retry_after_seconds(backlog: int, threshold: int, rate: float | None, *, fallback: int) -> int:
    """How long until the backlog drains back under ``threshold`` at ``rate``; ``fallback`` (the
    configured Retry-After) before any rate is measured. At least 1 s, at most a minute."""
    if rate is None or rate <= 0:
        return fallback
    excess = backlog - threshold + 1
    return max(1, min(MAX_RETRY_AFTER_SECONDS, math.ceil(excess / rate)))
