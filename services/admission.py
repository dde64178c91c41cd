"""The front end's view of the backlog (C3): the orders queue's active messages, read at most
once per ``SAS_QUEUE_DEPTH_CACHE_SECONDS``, plus the Pending records; and the drain rate that
sets ``Retry-After``."""

import logging
import threading
from datetime import datetime, timedelta

from domain.admission import Backlog, DrainMeter, drain_from_slots, retry_after_seconds
from domain.ports import Clock, QueueDepth, StateStore
from domain.states import ProcessState

log = logging.getLogger("sas.admission")

_PENDING = frozenset({ProcessState.PENDING})


class Admission:
    """One per process: the cached backlog, and how many submissions this process admitted."""

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
        self._cache = cache
        self._lock = threading.Lock()
        self._read_at: datetime | None = None
        self._backlog = Backlog(0, 0)
        self._admitted = 0
        self._admitted_since_read = 0
        self._meter = DrainMeter()
        self._slots_read_at: datetime | None = None
        self._slots_rate: float | None = None

    def backlog(self) -> Backlog:
        """The backlog as of at most ``cache`` ago, plus what this process admitted since: a
        burst that arrives faster than the cache refreshes is still counted."""
        now = self._clock.now()
        with self._lock:
            fresh = self._read_at is not None and now - self._read_at < self._cache
            if fresh:
                return Backlog(self._backlog.queued + self._admitted_since_read, self._backlog.pending)
        backlog = Backlog(self._queued(), self._states.count_in_states(_PENDING))
        with self._lock:
            self._read_at, self._backlog, self._admitted_since_read = now, backlog, 0
            self._meter.observe(now, backlog.total, self._admitted)
        return backlog

    def admitted(self) -> None:
        with self._lock:
            self._admitted += 1
            self._admitted_since_read += 1

    def retry_after(self, backlog: Backlog, threshold: int, fallback: int) -> int:
        """From the first refusal on: the backlog's measured drain, or before this process has
        measured one, the claims' pace read off the in-flight slots (one read, cached as the
        backlog is); ``fallback`` only when neither says anything."""
        with self._lock:
            rate = self._meter.rate()
        if rate is None:
            rate = self._slot_drain()
        return retry_after_seconds(backlog.total, threshold, rate, fallback=fallback)

    def _slot_drain(self) -> float | None:
        now = self._clock.now()
        with self._lock:
            if self._slots_read_at is not None and now - self._slots_read_at < self._cache:
                return self._slots_rate
        try:
            rate = drain_from_slots(self._states.slots_acquired(), now)
        except Exception:  # advice only, as the queue's length is
            log.warning("could not read the in-flight slots", exc_info=True)
            rate = None
        with self._lock:
            self._slots_read_at, self._slots_rate = now, rate
        return rate

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
