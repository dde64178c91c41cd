"""Admission control (C3): how big the backlog is, and when a refused submitter should come back.

The backlog is what waits to be worked on: the orders queue's active messages (posted, not yet
taken by the submission function) plus the Pending records (stored, not yet claimed). Counting
only the records misses a fast burst, which sits in the queue.

The backlog is read once per cell of a fixed grid (``ReadGrid``, ``SAS_QUEUE_DEPTH_CACHE_SECONDS``
wide): each read is billed (the queue's count over ARM or Service Bus management, a Cosmos DB
query, a point read of the in-flight slots), so in between the front end answers from the last
read plus what it admitted since.

``Retry-After`` says when to come back (issue 51): at the first read of the grid by which the
drain, at the rate this process measured, has made room for this caller behind the callers
already told to come back (``Returns``). A caller told N seconds therefore finds, at N seconds,
a backlog read after it was refused, and room that was kept for it: a caller returning at its
time is let in while the backlog is under the threshold, a new caller only while the backlog
plus the callers told to come back is.

The rate: what left the backlog between this process's reads (``DrainMeter``). Until it has
seen the backlog drain for a second (the first refusals of a burst), it is read off the
in-flight slots instead: at the cap every slot was taken within the last attempt's duration T,
so slots held ÷ the oldest slot's age is the drain cap ÷ T (issue 40). Until the burst's first
attempts end it is an upper bound: an attempt lasts at least as long as its oldest slot.
"""

import bisect
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
    """The backlog's drain rate from samples of (time, backlog, submissions admitted so far,
    attempts in flight).

    What left the backlog between two samples is what came in minus how much it grew; less what
    went to fill the in-flight slots, when both samples know them. A burst's first claims fill
    the slots at once, and counted as drain they made the first window's rate too high (issue
    51): at the cap, the backlog drains only as attempts end. Only this process's admissions
    are known, so with several instances the rate is underestimated, and ``Retry-After`` errs
    long: the safe side."""

    window: timedelta = timedelta(seconds=30)
    _samples: deque[tuple[datetime, int, int, int | None]] = field(default_factory=deque)

    def observe(self, now: datetime, backlog: int, admitted: int, in_flight: int | None = None) -> None:
        self._samples.append((now, backlog, admitted, in_flight))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()

    def rate(self) -> float | None:
        """Orders per second that left the backlog over the window, or None before there is a
        measurement (less than a second of samples, or no drain seen)."""
        if len(self._samples) < 2:
            return None
        (t0, backlog0, admitted0, flying0) = self._samples[0]
        (t1, backlog1, admitted1, flying1) = self._samples[-1]
        seconds = (t1 - t0).total_seconds()
        if seconds < 1:
            return None
        drained = (admitted1 - admitted0) - (backlog1 - backlog0)
        if flying0 is not None and flying1 is not None:
            drained -= flying1 - flying0
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


@dataclass(frozen=True)
class ReadGrid:
    """When the backlog may be read again: once per cell of ``every`` from ``anchor``. A fixed
    grid rather than an expiry after each read, so that the next reads' times are known at the
    refusal: a read taken late by a late request does not shift the ones after it."""

    anchor: datetime
    every: timedelta

    def cell(self, at: datetime) -> int:
        return math.floor((at - self.anchor) / self.every)

    def start(self, cell: int) -> datetime:
        return self.anchor + self.every * cell


# A caller this late is taken for a new one: its room goes to those behind it.
RETURN_GRACE = timedelta(seconds=5)


@dataclass
class Returns:
    """The callers this process told to come back, by OrderID, and when: the room the drain
    makes by then is theirs. One process's book: a caller that comes back to another instance
    is a new caller there."""

    grace: timedelta = RETURN_GRACE
    _due: dict[str, datetime] = field(default_factory=dict)
    _queue: list[tuple[datetime, str]] = field(default_factory=list)  # sorted by due

    def promise(self, order_id: str, due: datetime) -> None:
        self.release(order_id)
        self._due[order_id] = due
        bisect.insort(self._queue, (due, order_id))

    def due(self, order_id: str) -> datetime | None:
        return self._due.get(order_id)

    def release(self, order_id: str) -> None:
        due = self._due.pop(order_id, None)
        if due is not None:
            del self._queue[bisect.bisect_left(self._queue, (due, order_id))]

    def expire(self, now: datetime) -> None:
        late = bisect.bisect_left(self._queue, (now - self.grace, ""))
        for _, order_id in self._queue[:late]:
            del self._due[order_id]
        del self._queue[:late]

    def __len__(self) -> int:
        return len(self._queue)

    def due_before(self, moment: datetime) -> int:
        return bisect.bisect_left(self._queue, (moment, ""))


def retry_after_seconds(
    now: datetime,
    backlog: int,
    threshold: int,
    rate: float | None,
    *,
    read_at: datetime,
    grid: ReadGrid,
    returns: Returns,
    fallback: int,
) -> int:
    """Seconds until the first read of ``grid`` at which there is room for one more caller than
    ``returns`` sends back within that read's cell. The backlog (as read at ``read_at``, plus
    what was admitted since) is followed read by read: it drains at ``rate``, never below
    nothing, and takes in the callers sent back to each cell, as the front end will let them in.
    Never less than the time to the next read: before it the answer cannot change. Before any
    rate is measured, ``fallback`` (the configured Retry-After), or the next read if later. At
    least 1 s; at most a minute, or the next read if that is later."""
    next_read = grid.start(grid.cell(now) + 1)
    if rate is None or rate <= 0:
        return whole_seconds(max(next_read, now + timedelta(seconds=fallback)) - now)
    limit = now + timedelta(seconds=MAX_RETRY_AFTER_SECONDS)
    # Those due back before the next read come in on the count as last read.
    waiting, since = float(backlog + returns.due_before(next_read)), read_at
    read = next_read
    while read < limit:
        waiting = max(0.0, waiting - rate * (read - since).total_seconds())
        following = read + grid.every
        back = returns.due_before(following) - returns.due_before(read)
        if threshold - math.ceil(waiting) > back:
            break
        waiting, since, read = waiting + back, read, following
    return whole_seconds(max(next_read, min(read, limit)) - now)


def whole_seconds(wait: timedelta) -> int:
    """A wait as Retry-After's whole seconds: rounded up, so the caller comes no earlier."""
    return max(1, math.ceil(wait.total_seconds()))
