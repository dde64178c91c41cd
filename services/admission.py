"""The front end's view of the backlog (C3): the orders queue's active messages plus the Pending
records, read once per ``SAS_QUEUE_DEPTH_CACHE_SECONDS`` cell of a fixed grid; who is let in;
and the Retry-After of who is not, with the room it promises kept for the caller it was told to.

Why a grid and promises (issue 51): the backlog used to be re-read ``SAS_QUEUE_DEPTH_CACHE_SECONDS``
after the last read while Retry-After said how long the excess would take to drain, mostly 1 s.
A caller that waited it found the same cached count and was refused again (28 of 30 in a
1,000-order burst), and callers refused together came back together. Re-reading for each
returning caller instead would cost one Service Bus management read and one Cosmos DB query per
return; so the reads stay at most one per cell per process, and the Retry-After is fitted to
them: the first read by which the measured drain has room for this caller behind those told
to come back before it (``domain.admission.retry_after_seconds``).
"""

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from domain.admission import (
    Backlog,
    DrainMeter,
    ReadGrid,
    Returns,
    drain_from_slots,
    retry_after_seconds,
    whole_seconds,
)
from domain.ports import Clock, QueueDepth, StateStore
from domain.states import ProcessState

log = logging.getLogger("sas.admission")

_PENDING = frozenset({ProcessState.PENDING})


@dataclass(frozen=True)
class Refusal:
    backlog: Backlog
    promised: int  # callers told to come back before this one, whose room is kept for them
    retry_after: int


class Admission:
    """One per process: the backlog as last read, how many submissions this process admitted,
    and the callers it told to come back."""

    def __init__(
        self,
        states: StateStore,
        depth: QueueDepth | None,
        clock: Clock,
        *,
        queue: str,
        cache: timedelta,
    ) -> None:
        self._states = states
        self._depth = depth
        self._clock = clock
        self._queue = queue
        self._lock = threading.Lock()
        # Anchored where this process starts; any anchor serves, as long as it stays put.
        self._grid = ReadGrid(clock.now(), cache)
        self._read_at: datetime | None = None
        self._backlog = Backlog(0, 0)
        self._admitted = 0
        self._admitted_since_read = 0
        self._meter = DrainMeter()
        self._returns = Returns()
        self._slots_read_at: datetime | None = None
        self._slots_rate: float | None = None

    def backlog(self) -> Backlog:
        """The backlog as last read in this cell of the grid, plus what this process admitted
        since: a burst that arrives faster than the reads is still counted."""
        return self._read()[0]

    def refusal(self, order_id: str, threshold: int, fallback: int) -> Refusal | None:
        """None to let ``order_id`` in; else the 429's figures, and the caller's time is kept.

        A caller back at (or after) the time it was told is let in while the backlog is under
        ``threshold``: the room was kept for it. A new caller is let in only while the backlog
        plus the callers told to come back is; otherwise it is told to come back after them."""
        backlog, read_at = self._read()
        with self._lock:
            now = self._clock.now()
            self._returns.expire(now)
            due = self._returns.due(order_id)
            # Its room kept, a caller back at its time counts no one else's; any other counts all.
            returning = due is not None and now >= due
            promised = 0 if returning else len(self._returns) - (due is not None)
            if backlog.total + promised < threshold:
                return None
            if due is not None and now < due:  # early: its place stands, and so does its time
                return Refusal(backlog, promised, whole_seconds(due - now))
            self._returns.release(order_id)
        rate = self._rate()
        with self._lock:
            retry_after = retry_after_seconds(
                now,
                backlog.total,
                threshold,
                rate,
                read_at=read_at,
                grid=self._grid,
                returns=self._returns,
                fallback=fallback,
            )
            self._returns.promise(order_id, now + timedelta(seconds=retry_after))
        return Refusal(backlog, promised, retry_after)

    def admitted(self, order_id: str) -> None:
        with self._lock:
            self._admitted += 1
            self._admitted_since_read += 1
            self._returns.release(order_id)

    def _read(self) -> tuple[Backlog, datetime]:
        now = self._clock.now()
        with self._lock:
            if self._read_at is not None and self._same_cell(now, self._read_at):
                cached = Backlog(self._backlog.queued + self._admitted_since_read, self._backlog.pending)
                return cached, self._read_at
        backlog = Backlog(self._queued(), self._states.count_in_states(_PENDING))
        slots = self._slots()
        with self._lock:
            self._read_at, self._backlog, self._admitted_since_read = now, backlog, 0
            self._meter.observe(now, backlog.total, self._admitted, None if slots is None else len(slots))
        return backlog, now

    def _same_cell(self, at: datetime, read_at: datetime) -> bool:
        return self._grid.cell(at) == self._grid.cell(read_at)

    def _rate(self) -> float | None:
        """From the first refusal on: the backlog's measured drain, or before this process has
        measured one, the claims' pace read off the in-flight slots."""
        with self._lock:
            measured = self._meter.rate()
        return measured if measured is not None else self._slot_drain()

    def _slot_drain(self) -> float | None:
        """The claims' pace at the first refusal of a cell (one read per cell). An upper bound
        until the burst's first attempts end, as an attempt lasts at least as long as its
        oldest slot. Not the slots read with the backlog: at an idle start those say nothing."""
        now = self._clock.now()
        with self._lock:
            if self._slots_read_at is not None and self._same_cell(now, self._slots_read_at):
                return self._slots_rate
        slots = self._slots()
        rate = None if slots is None else drain_from_slots(slots, now)
        with self._lock:
            self._slots_read_at, self._slots_rate = now, rate
        return rate

    def _slots(self) -> list[datetime] | None:
        """When each in-flight slot was taken."""
        try:
            return self._states.slots_acquired()
        except Exception:  # advice only, as the queue's length is
            log.warning("could not read the in-flight slots", exc_info=True)
            return None

    def _queued(self) -> int:
        if self._depth is None:
            return 0  # no way to read the queue here: the Pending records alone
        try:
            return self._depth.active_messages(self._queue)
        except Exception:  # admission is advice: a failed count must not refuse or hold a POST
            log.warning(
                "could not read the %s queue's length; using the last one", self._queue, exc_info=True
            )
            return self._backlog.queued
