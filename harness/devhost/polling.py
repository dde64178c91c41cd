"""The one way every trigger source is driven, in virtual time and in real time.

A source's work is done by ``Poller``s (the timers; one per Service Bus function; the
orchestrations; the activities). Each has a single ``poll``: start what is due now. Two drivers
call it and nothing else:

- ``step`` (virtual time, ``Host.run_until``): poll, then wait for what was started to finish
  (``settle``), so the clock moves only while the host is idle.
- ``serve`` (real time, ``Host.serve``): poll, then sleep until the poller is woken (told of new
  work, or a slot freed) or its next item comes due, bounded by ``idle_wait``; on cancellation,
  give up what still runs (``stop``).
"""

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Protocol

from harness.devhost.clock import HostClock
from harness.devhost.indexing import FunctionSpec
from harness.devhost.protocol import function_rpc_pb2 as rpc

log = logging.getLogger("devhost")

# The longest an idle loop waits without being told of new work: a bound for what nothing
# announces (activity leases that ran out, a broker's receive that failed, a wall clock that
# jumped while asyncio's monotonic sleep did not) and a backstop should a wake-up ever be missed.
IDLE_WAIT = 1.0

# How a trigger source runs a function: the host's InvocationRequest to the worker.
Invoke = Callable[
    [FunctionSpec, rpc.TypedData, Mapping[str, rpc.TypedData] | None], Awaitable[rpc.InvocationResponse]
]


class Poller(Protocol):
    @property
    def name(self) -> str:
        """What the log calls this poller."""
        ...

    @property
    def wake(self) -> asyncio.Event:
        """Set when polling again may find work: new work was announced, a slot freed, or
        ``poll`` itself found more ready at once."""
        ...

    async def poll(self) -> int:
        """Start what is due now, as far as free slots allow; how many items were started."""
        ...

    async def settle(self) -> None:
        """Wait for what ``poll`` started to finish and record it."""
        ...

    async def stop(self) -> None:
        """Give up what still runs (it runs again after a restart: at least once, as in Azure)."""
        ...

    def next_due(self) -> datetime | None:
        """When this poller next has work that nothing will wake it for."""
        ...


async def step(poller: Poller) -> int:
    """Virtual time: what is due now, run to the end; how many items ran."""
    started = await poller.poll()
    await poller.settle()
    return started


async def serve(poller: Poller, clock: HostClock, idle_wait: float) -> None:
    """Real time, until cancelled: poll whenever woken or due, never on a fixed interval."""
    try:
        while True:
            # Cleared before the poll, not after: work announced while it runs must end the wait
            # below at once, or it waits for idle_wait.
            poller.wake.clear()
            try:
                await poller.poll()
            except Exception:  # keep serving; the cause is in the log
                log.exception("devhost %s failed", poller.name)
            await _idle(poller.wake, poller.next_due(), clock, idle_wait)
    finally:
        await poller.stop()


async def _idle(wake: asyncio.Event, due: datetime | None, clock: HostClock, idle_wait: float) -> None:
    """Until ``wake`` is set or ``due`` comes, and no longer than ``idle_wait``. asyncio sleeps
    on the monotonic clock, which a suspended laptop or a stepped wall clock leaves behind, and
    ``due`` is on the wall clock: hence the bound even when something is due."""
    wait = idle_wait
    if due is not None:
        wait = min(wait, max((due - clock.now()).total_seconds(), 0))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), timeout=wait)
