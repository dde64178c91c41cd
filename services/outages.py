"""One operator alert per outage of a dependency, not one per failed message or activity.

The guarded ports (``adapters.resilience.guard``) report every call that gave up on transient
faults and every call that succeeded. The first give-up opens an outage and alerts; later ones
only count; the first success closes it with a log line saying how long it lasted. State is per
process: N instances of the app raise at most N alerts for one outage, and the alert's MessageId
(dependency and the minute the outage began) lets the broker drop copies that agree on it.
"""

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from domain.ports import Clock

log = logging.getLogger("sas.outages")

Alert = Callable[[str, str, datetime], None]  # dependency, reason, since


@dataclass
class Outage:
    since: datetime
    failures: int


class OutageMonitor:
    def __init__(self, clock: Clock, alert: Alert) -> None:
        self._clock = clock
        self._alert = alert
        self._down: dict[str, Outage] = {}
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
        try:
            self._alert(dependency, f"the {dependency} is unavailable: {error}", now)
        except Exception:  # the alert's own path may be what is down: the log line above stands
            log.exception("could not send the outage alert for the %s", dependency)

    def available(self, dependency: str) -> None:
        if dependency not in self._down:  # the common case, without the lock
            return
        with self._lock:
            outage = self._down.pop(dependency, None)
        if outage is not None:
            log.warning(
                "the %s is available again after %s (%d calls gave up meanwhile)",
                dependency,
                self._clock.now() - outage.since,
                outage.failures,
            )

    def outages(self) -> dict[str, Outage]:
        """The dependencies down now, for health reports and tests."""
        with self._lock:
            return dict(self._down)
