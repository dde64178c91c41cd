"""Timer triggers: six-field NCRONTAB schedules, ``runOnStartup`` and ``useMonitor``, as the
Functions host runs them. The last occurrence of each is kept in the task hub (``durable.db``), so
one missed while devhost was down fires once at start, as past due."""

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime

from croniter import croniter

from harness.devhost import bindings
from harness.devhost.clock import HostClock
from harness.devhost.durable_store import DurableStore
from harness.devhost.durable_wire import format_time, parse_time
from harness.devhost.indexing import FunctionSpec
from harness.devhost.polling import Invoke
from harness.devhost.settings import SettingsError
from harness.devhost.worker import InvocationFailed

log = logging.getLogger("devhost")


class TimerTriggers:
    """The app's timer functions: one poller for all of them."""

    name = "timer loop"

    def __init__(
        self, specs: Sequence[FunctionSpec], store: DurableStore, clock: HostClock, invoke: Invoke
    ) -> None:
        for spec in specs:
            schedule = str(spec.trigger["schedule"])
            if not croniter.is_valid(schedule, second_at_beginning=True) or len(schedule.split()) != 6:
                raise SettingsError(
                    f"function {spec.name}: {schedule!r} is not a six-field NCRONTAB expression "
                    "(second minute hour day month day-of-week)"
                )
        self.specs = list(specs)
        self._store = store
        self._clock = clock
        self._invoke = invoke
        self._next_fire: dict[str, datetime] = {}
        # Nothing announces an occurrence: the poller sleeps until the next one is due.
        self.wake = asyncio.Event()

    async def start(self) -> None:
        """``runOnStartup``, and with ``useMonitor`` an occurrence missed while the host was down."""
        now = self._clock.now()
        for spec in self.specs:
            last = self._last_fired(spec.name)
            missed = last is not None and _next_after(spec, last) <= now
            if spec.trigger.get("runOnStartup") or (spec.trigger.get("useMonitor", True) and missed):
                await self._fire(spec, past_due=bool(missed), scheduled=now)
            self._next_fire[spec.name] = _next_after(spec, now)

    async def poll(self) -> int:
        now = self._clock.now()
        fired = 0
        for spec in self.specs:
            due = self._next_fire[spec.name]
            if due <= now:
                # Occurrences missed while the clock jumped fire once, as past due, like Azure.
                past_due = _next_after(spec, due) <= now
                self._next_fire[spec.name] = _next_after(spec, now)
                await self._fire(spec, past_due=past_due, scheduled=due)
                fired += 1
        return fired

    async def settle(self) -> None:
        """Nothing to wait for: ``poll`` fires each occurrence to its end."""

    async def stop(self) -> None:
        """Nothing runs after ``poll`` returns."""

    def next_due(self) -> datetime | None:
        return min(self._next_fire.values(), default=None)

    def _last_fired(self, name: str) -> datetime | None:
        stamp = self._store.last_fired(name)
        return parse_time(stamp) if stamp is not None else None

    async def _fire(self, spec: FunctionSpec, *, past_due: bool, scheduled: datetime) -> None:
        with self._store.tx() as tx:
            tx.record_fired(spec.name, format_time(scheduled))
        info, metadata = bindings.timer_info(
            past_due=past_due,
            last=scheduled,
            next_=_next_after(spec, scheduled),
            now=self._clock.now(),
            monitored=bool(spec.trigger.get("useMonitor", True)),
        )
        try:
            await self._invoke(spec, info, metadata)
        except InvocationFailed as error:  # a failing timer function must not stop its schedule
            log.error("timer function %s failed: %s\n%s", spec.name, error.message, error.stack_trace)


def _next_after(spec: FunctionSpec, moment: datetime) -> datetime:
    schedule = str(spec.trigger["schedule"])
    nxt: datetime = croniter(schedule, moment, second_at_beginning=True).get_next(datetime)
    return nxt
