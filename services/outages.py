"""One operator alert per outage of a dependency, not one per failed message or activity, and
what the Supervisor and the front end know of outages.

The guarded ports (``adapters.resilience.guard``) report every call that gave up on transient
faults and every call that succeeded. The first give-up opens an outage and alerts; later ones
only count; the first success closes it, with a log line saying how long it lasted and one
``DependencyRecovered`` note. While an outage is open, a guarded call makes a single try (a
probe) instead of spending its retry budget, so a caller hears at once what this process
already knows. State is per process: N instances of the app raise at most N alerts for one
outage, and the alert's MessageId (dependency and the minute the outage began) lets the broker
drop copies that agree.

Ended outages are kept for a day (``windows``): the Supervisor puts an expired attempt that
lived through one down to the outage, not to the order (``domain.outage``).
"""

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from domain.outage import OutageWindow
from domain.ports import Clock

log = logging.getLogger("sas.outages")

Alert = Callable[[str, str, datetime], None]  # dependency, reason, since

# Ended outages the Supervisor may still meet in an expired record: an attempt that died in
# one is recovered within minutes of its end, unless the Supervisor itself is down for longer.
KEEP_ENDED = timedelta(days=1)
MAX_ENDED = 256  # a flapping dependency must not grow this without bound


@dataclass
class Outage:
    since: datetime
    failures: int


def _never(dependency: str, reason: str, since: datetime) -> None:
    del dependency, reason, since


class OutageMonitor:
    def __init__(self, clock: Clock, alert: Alert, recovered: Alert = _never) -> None:
        self._clock = clock
        self._alert = alert
        self._recovered = recovered
        self._down: dict[str, Outage] = {}
        self._ended: deque[OutageWindow] = deque()
        self._lock = threading.Lock()

    def unavailable(self, dependency: str, error: BaseException) -> None:
        now = self._clock.now()
        with self._lock:
            outage = self._down.get(dependency)
            if outage is not None:
                outage.failures += 1
                return
            self._down[dependency] = Outage(since=now, failures=1)
        log.error("the %s is unavailable: %s", dependency, error)
        self._tell(self._alert, dependency, f"the {dependency} is unavailable: {error}", now)

    def available(self, dependency: str) -> None:
        if dependency not in self._down:  # the common case, without the lock
            return
        now = self._clock.now()
        with self._lock:
            outage = self._down.pop(dependency, None)
            if outage is not None:
                self._ended.append(OutageWindow(dependency, outage.since, now))
                self._forget_old(now)
        if outage is not None:
            lasted = now - outage.since
            log.warning(
                "the %s is available again after %s (%d calls gave up meanwhile)",
                dependency,
                lasted,
                outage.failures,
            )
            reason = f"the {dependency} is available again after {lasted} ({outage.failures} calls gave up)"
            self._tell(self._recovered, dependency, reason, outage.since)

    def is_down(self, dependency: str) -> bool:
        """This process saw ``dependency`` give up and has not seen it answer since."""
        return dependency in self._down

    def outages(self) -> dict[str, Outage]:
        """The dependencies down now, for health reports and tests."""
        with self._lock:
            return dict(self._down)

    def windows(self) -> list[OutageWindow]:
        """The outages open now and those that ended within ``KEEP_ENDED``, oldest first."""
        with self._lock:
            self._forget_old(self._clock.now())
            open_now = [OutageWindow(d, o.since) for d, o in self._down.items()]
            return [*self._ended, *sorted(open_now, key=lambda w: w.since)]

    def _forget_old(self, now: datetime) -> None:
        while self._ended and (
            len(self._ended) > MAX_ENDED
            or (self._ended[0].until is not None and self._ended[0].until < now - KEEP_ENDED)
        ):
            self._ended.popleft()

    def _tell(self, alert: Alert, dependency: str, reason: str, since: datetime) -> None:
        try:
            alert(dependency, reason, since)
        except Exception:  # the alert's own path may be what is down: the log line stands
            log.exception("could not send the outage note for the %s", dependency)
