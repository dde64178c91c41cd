"""Service Bus queue triggers, peek-lock as the Service Bus extension runs them: complete when the
function succeeds, abandon when it fails, the lock renewed while it runs (real time only).

The source is the local bus when the triggers' connection setting is ``local``
(``adapters/servicebus/local_bus.py``), else the broker it names (``servicebus_broker.py``).
"""

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

from adapters.servicebus.clients import servicebus_client
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import MessageAlreadySettled, MessageLockLost, QueueConfig, ReceivedMessage
from harness.devhost import bindings
from harness.devhost.clock import HostClock, VirtualClock
from harness.devhost.indexing import FunctionSpec
from harness.devhost.polling import Invoke
from harness.devhost.settings import SettingsError
from harness.devhost.worker import InvocationFailed
from settings import LOCAL_SERVICEBUS, is_local_bus

log = logging.getLogger("devhost")

# How often the bus watcher reads the local bus file's commit counter (what ``wait_for_commit``
# reads): a message hop waits half of it on average. 10 ms matches the eight 50 ms pollers per
# queue it replaces (the first of eight random phases came after ~6 ms) at a sixth of their idle
# CPU (harness/bench/devhost_idle.py); each wake-up, not the read, is most of that cost.
COMMIT_CHECK_INTERVAL = 0.01


class TriggerBus(Protocol):
    """What the Service Bus triggers need: the local bus, or a broker via the SDK."""

    def queues(self) -> list[QueueConfig]: ...
    def receive(self, queue: str, max_messages: int) -> list[ReceivedMessage]: ...
    def complete(self, message: ReceivedMessage) -> None: ...
    def abandon(self, message: ReceivedMessage) -> None: ...
    def renew_lock(self, message: ReceivedMessage) -> datetime: ...
    def next_due(self) -> datetime | None: ...
    def close(self) -> None: ...


class ServiceBusTriggers:
    """The app's Service Bus functions on one bus: a ``QueueTrigger`` poller for each, and in real
    time on the local bus, one watcher that wakes them (``watch``)."""

    def __init__(
        self,
        specs: Sequence[FunctionSpec],
        env: Mapping[str, str],
        *,
        bus_path: Path,
        declared: list[QueueConfig],
        config_path: Path | None,
        clock: HostClock,
        invoke: Invoke,
        concurrency: int,
        operations: Counter[str],
    ) -> None:
        self.bus = _open_bus(specs, env, bus_path, declared, clock)
        self._bus_path = bus_path
        self._clock = clock
        self._invoke = invoke
        # What the Service Bus extension does on the triggers' behalf, as Service Bus bills it:
        # receive calls, and each complete, abandon and lock renewal.
        self.operations = operations
        try:
            _check_declared(specs, self.bus, config_path)
        except SettingsError:
            self.bus.close()
            raise
        self._pool = ThreadPoolExecutor(max_workers=max(4, concurrency * 2))
        # On the local bus the watcher wakes the triggers; a broker's receive waits by itself.
        self.watched = isinstance(self.bus, LocalServiceBus)
        self.triggers = [QueueTrigger(self, spec, concurrency) for spec in specs]

    def next_due(self) -> datetime | None:
        """The next scheduled message or lock expiry: in real time the watcher wakes the triggers
        for it, in virtual time the clock jumps to it."""
        return self.bus.next_due()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.bus.close()

    async def watch(self, idle_wait: float) -> None:
        """Real time, local bus: wake the triggers when a message may have become receivable: a
        commit to the bus file by any connection (the app's worker process, an agent, this host's
        own receives and settlements), or the earliest scheduled message or lock expiry coming due.

        The commit counter is read here, on the event loop, rather than by ``wait_for_commit`` in
        a thread, which could not be cancelled when the host stops. The connection is the
        watcher's own and never writes: SQLite's ``data_version`` counts only other connections'
        commits, so a connection that also sent would not see its own sends."""
        bus = LocalServiceBus(self._bus_path, clock=self._clock.now)
        try:
            seen = bus.commit_marker()
            due = bus.next_due()
            while True:
                await asyncio.sleep(COMMIT_CHECK_INTERVAL)
                try:
                    marker = bus.commit_marker()
                    if marker == seen and (due is None or due > self._clock.now()):
                        continue
                    # The counter is read before the triggers wake, so none misses a commit: a
                    # trigger receives after this read and sees what came before it, and anything
                    # later moves the counter again.
                    seen, due = marker, bus.next_due()
                except Exception:  # the triggers still receive, on their idle_wait; the cause is in the log
                    log.exception("devhost Service Bus watcher failed")
                    await asyncio.sleep(idle_wait)
                for trigger in self.triggers:
                    trigger.wake.set()
        finally:
            bus.close()

    async def handle(self, spec: FunctionSpec, message: ReceivedMessage) -> None:
        """One delivery: the function, then complete or abandon, the lock kept meanwhile."""
        renewer = asyncio.create_task(self._renew_lock(message))
        try:
            body, metadata = bindings.servicebus_message(message, bindings.servicebus_data_type(spec.trigger))
            await self._invoke(spec, body, metadata)
        except InvocationFailed as error:
            # A failure means abandon: the broker counts deliveries and dead-letters at the limit.
            log.warning(
                "function %s failed on message %s (delivery %d): %s",
                spec.name,
                message.message_id,
                message.delivery_count,
                error,
            )
            settle: Callable[[ReceivedMessage], None] = self.bus.abandon
        else:
            settle = self.bus.complete
        finally:
            renewer.cancel()
            # A renewer that failed must not keep the message from being settled.
            await asyncio.gather(renewer, return_exceptions=True)
        try:
            self.operations[settle.__name__] += 1
            await self._in_pool(settle, message)
        except MessageAlreadySettled:
            # The function settled the message itself (dead-lettered it through its lock token):
            # the Functions host skips its own complete or abandon then, so this is no news.
            log.debug("message %s of %s was settled already, by the function", message.message_id, spec.name)
        except MessageLockLost:
            log.warning(
                "lock lost on message %s of %s: it will be redelivered", message.message_id, spec.name
            )
        except Exception:  # a broker or connection error: the lock expires and the broker redelivers
            log.exception("settling message %s of %s failed", message.message_id, spec.name)

    async def _renew_lock(self, message: ReceivedMessage) -> None:
        """Keep the peek-lock while the function runs, as the Functions host does: halfway to the
        expiry the broker last reported, so a shorter lock than the config declares is kept too."""
        if isinstance(self._clock, VirtualClock):
            return  # virtual time only moves while the host is idle: a lock cannot expire mid-call
        locked_until = message.locked_until
        while True:
            await asyncio.sleep(max((locked_until - self._clock.now()).total_seconds() / 2, 0.01))
            try:
                self.operations["renew_lock"] += 1
                locked_until = await self._in_pool(self.bus.renew_lock, message)
            except MessageLockLost:
                return  # settled meanwhile (e.g. dead-lettered by the function), or really lost
            except Exception:  # a passing broker error: try again at the next interval
                log.exception("renewing the lock on message %s failed", message.message_id)
                locked_until = self._clock.now() + timedelta(seconds=1)

    async def receive(self, queue: str, max_messages: int) -> list[ReceivedMessage]:
        messages = await self._in_pool(self.bus.receive, queue, max_messages)
        self.operations["receive"] += 1
        return messages

    async def _in_pool[**P, R](self, call: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """A bus call off the event loop: the local bus's SQLite and the SDK both block."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, lambda: call(*args, **kwargs))


class QueueTrigger:
    """One Service Bus function: up to DEVHOST_CONCURRENCY of its messages at a time. One receive
    asks for as many messages as there are free slots, so a commit wakes one receive per function
    rather than one per slot (each takes the bus file's write lock)."""

    def __init__(self, source: ServiceBusTriggers, spec: FunctionSpec, concurrency: int) -> None:
        self._source = source
        self.spec = spec
        self.queue = str(spec.trigger["queueName"])
        self.name = f"Service Bus trigger {spec.name} on {self.queue}"
        self._concurrency = concurrency
        self._running: set[asyncio.Task[None]] = set()
        self.wake = asyncio.Event()

    async def poll(self) -> int:
        free = self._concurrency - len(self._running)
        if free <= 0:
            return 0  # a finishing message sets wake
        messages = await self._source.receive(self.queue, free)
        for message in messages:
            task = asyncio.create_task(self._source.handle(self.spec, message))
            self._running.add(task)
            task.add_done_callback(self._done)
        if not self._source.watched:
            self.wake.set()  # a broker's receive has waited for a message already
        return len(messages)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a message task of %s failed", self.spec.name, exc_info=task.exception())
        self.wake.set()

    async def settle(self) -> None:
        await asyncio.gather(*self._running)

    async def stop(self) -> None:
        # What is still running is given up; its lock runs out and the message is delivered
        # again (at least once, as in Azure).
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    def next_due(self) -> None:
        """Woken, never due: by the watcher on the local bus, by its own receive on a broker."""
        return None


def _check_declared(specs: Sequence[FunctionSpec], bus: TriggerBus, config_path: Path | None) -> None:
    known = {q.name for q in bus.queues()}
    for spec in specs:
        queue = str(spec.trigger["queueName"]).lower()
        if queue not in known:
            raise SettingsError(
                f"function {spec.name}: queue {queue!r} is not declared in the Service Bus config "
                f"({config_path or 'none found: set DEVHOST_SERVICEBUS_CONFIG'})"
            )


def _connection(spec: FunctionSpec, env: Mapping[str, str]) -> str:
    """The connection a trigger names: ``local``, a connection string or a namespace."""
    name = str(spec.trigger.get("connection") or "")
    connection, namespace = env.get(name), env.get(f"{name}__fullyQualifiedNamespace")
    if not connection and not namespace:
        raise SettingsError(f"function {spec.name}: connection setting {name!r} is not set")
    if is_local_bus(connection, namespace, unset_is_local=False):
        return LOCAL_SERVICEBUS
    return str(namespace or connection)


def _open_bus(
    specs: Sequence[FunctionSpec],
    env: Mapping[str, str],
    path: Path,
    declared: list[QueueConfig],
    clock: HostClock,
) -> TriggerBus:
    """The local bus when the triggers' connection is "local", else the broker it names (a
    connection string, or a namespace reached with DefaultAzureCredential)."""
    connections = {_connection(spec, env) for spec in specs}
    if len(connections) > 1:
        raise SettingsError("devhost runs Service Bus triggers on one connection; these differ")
    if not connections or connections == {LOCAL_SERVICEBUS}:
        bus = LocalServiceBus(path, clock=clock.now)
        for queue in declared:
            bus.declare(queue)
        return bus
    if isinstance(clock, VirtualClock):
        raise SettingsError("a real Service Bus runs on real time: use serve(), not a virtual clock")
    from harness.devhost.servicebus_broker import BrokerServiceBus  # noqa: PLC0415

    return BrokerServiceBus(servicebus_client(connections.pop()), declared)
