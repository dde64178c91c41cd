"""The host: the app's functions on their trigger sources, wired together.

Each trigger source is a class of its own (``http_triggers``, ``timer_triggers``,
``servicebus_triggers``, ``durable_triggers``); this module builds them, starts and stops them,
and drives their pollers (``polling``) in one of two ways:
- ``serve`` (real clock): a background loop per poller, as ``func start`` runs them; each sleeps
  until it is told of work or something comes due, not for a fixed interval.
- ``run_until`` (virtual clock, tests): step every poller until the predicate holds; when
  nothing is runnable, jump the clock to the next due timer, schedule or message.
"""

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import socket
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol, TextIO

from azure.durable_functions.models.utils import http_utils as durable_http

from adapters.clock import use_host_clock
from harness.devhost import app_package, bindings, durable_api, polling
from harness.devhost.clock import HostClock, SystemClock, VirtualClock
from harness.devhost.config import DevhostConfig, load_host_json, queues_from_emulator_config, route_prefix
from harness.devhost.durable_engine import DurableEngine
from harness.devhost.durable_store import DurableStore
from harness.devhost.durable_triggers import DurableTriggers
from harness.devhost.http_triggers import HttpTriggers, listen
from harness.devhost.indexing import FunctionSpec, IndexingError, index
from harness.devhost.invocation_log import InvocationLog
from harness.devhost.polling import IDLE_WAIT, Poller
from harness.devhost.protocol import function_rpc_pb2 as rpc
from harness.devhost.servicebus_triggers import ServiceBusTriggers, TriggerBus
from harness.devhost.settings import load_local_settings
from harness.devhost.timer_triggers import TimerTriggers
from harness.devhost.worker import FunctionWorker, InvocationFailed, Worker, WorkerError
from harness.devhost.worker_processes import WorkerProcesses, process_count
from settings import DEFAULT_DATA_DIR

log = logging.getLogger("devhost")


class HostError(Exception):
    pass


class Idle(HostError):
    """Nothing is runnable and nothing is scheduled, yet the awaited condition does not hold."""


class ExtraSource(Protocol):
    def step(self) -> int:
        """Do what is due now; return how many items were handled."""
        ...

    def next_due(self) -> datetime | None: ...


class Host:
    def __init__(
        self,
        app_dir: Path,
        *,
        clock: HostClock | None = None,
        data_dir: Path | None = None,
        port: int | None = None,
        env: MutableMapping[str, str] | None = None,
        idle_wait: float = IDLE_WAIT,
        in_process: bool = False,
    ) -> None:
        """``in_process`` imports the app into this process instead of running the deployment
        package in worker processes: only for a test that reaches into the app's objects."""
        self.app_dir = app_dir.resolve()
        self.env = os.environ if env is None else env
        load_local_settings(self.app_dir, self.env)
        self.config = DevhostConfig.from_env(self.app_dir, self.env, data_dir=data_dir, port=port)
        # The workers run in the package folder: the app's default, made absolute in the app dir.
        self.env.setdefault("SAS_DATA_DIR", str(self.app_dir / DEFAULT_DATA_DIR))
        self.config.refuse_data_in_package(self.env)
        # Read first, as the Functions host reads it before it starts a worker: a bad one is a
        # start-up error, not a traceback after the workers are up.
        self.host_json = load_host_json(self.app_dir)
        self.clock: HostClock = clock or SystemClock()
        self.idle_wait = idle_wait
        self.functions: list[FunctionSpec] = []
        self._lock_file: TextIO | None = None
        self._listener: socket.socket | None = None
        self._loops: list[asyncio.Task[None]] = []
        # Work outside the app that tests run in lock-step with the host (e.g. a scripted agent).
        self.extra_sources: list[ExtraSource] = []
        self.in_process = in_process
        self.worker: FunctionWorker = Worker(self.app_dir)
        # Invocations through the worker, per trigger type and per function: what ran, for tests
        # and the log.
        self.invocations: Counter[str] = Counter()
        self.invocations_by_function: Counter[str] = Counter()
        # What the Service Bus extension does on the triggers' behalf, as Service Bus bills it:
        # receive calls, and each complete, abandon and lock renewal.
        self.servicebus_operations: Counter[str] = Counter()
        # Each invocation's outcome, where ops reads it (harness/devhost/invocation_log.py).
        self._outcomes: InvocationLog | None = None
        # The trigger sources, built by start() from what the worker indexed.
        self._http: HttpTriggers | None = None
        self._timers: TimerTriggers | None = None
        self._servicebus: ServiceBusTriggers | None = None
        self._durable: DurableTriggers | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._lock_data_dir()
        self._outcomes = InvocationLog(self.config.data_dir)
        self._listener = self._take_port()
        # Set before the workers start, which take their environment with them: the app's
        # embedded messaging adapter and agent processes open the same local bus file, and its
        # embedded stores the same folder (SAS_DATA_DIR, in __init__), as absolute paths.
        self.env["LOCAL_SERVICEBUS_PATH"] = str(self.config.servicebus_path)
        try:
            self.worker = self._worker()
            loaded = await self.worker.start()
        except (WorkerError, app_package.PackageError) as error:
            raise IndexingError(str(error)) from None
        self.functions = index(loaded, self.env)
        config = self.config
        self._servicebus = ServiceBusTriggers(
            self.by_trigger("serviceBusTrigger"),
            self.env,
            bus_path=config.servicebus_path,
            declared=queues_from_emulator_config(config.servicebus_config)
            if config.servicebus_config
            else [],
            config_path=config.servicebus_config,
            clock=self.clock,
            invoke=self.invoke,
            concurrency=config.concurrency,
            operations=self.servicebus_operations,
        )
        self._durable = DurableTriggers(
            config.data_dir / "durable.db",
            self.by_trigger("orchestrationTrigger"),
            self.by_trigger("activityTrigger"),
            clock=self.clock,
            invoke=self.invoke,
            concurrency=config.concurrency,
        )
        self._http = HttpTriggers(
            self.by_trigger("httpTrigger"), route_prefix(self.host_json), self._durable.engine, self.invoke
        )
        self._timers = TimerTriggers(
            self.by_trigger("timerTrigger"), self._durable.store, self.clock, self.invoke
        )
        await self._http.start(self._listener)
        await self._timers.start()

    async def stop(self) -> None:
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loops.clear()
        if self._http is not None:
            await self._http.stop()
        if self._listener is not None:
            self._listener.close()  # the server closed it already, unless the start failed before it ran
            self._listener = None
        await self.worker.stop()
        # The Durable SDK keeps one aiohttp session per process; close it with the host so no
        # "unclosed session" warning is left behind. Guarded: it is not public API.
        close_session = getattr(durable_http, "_close_session", None)
        if close_session is not None:
            await close_session()
        # A host whose start failed part way has only some of these.
        if self._servicebus is not None:
            self._servicebus.close()
        if self._durable is not None:
            self._durable.close()
        if self._outcomes is not None:
            self._outcomes.close()
            self._outcomes = None
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def _worker(self) -> FunctionWorker:
        if self.in_process:
            # The app runs in this process: it reads this host's time (adapters/clock.py).
            use_host_clock(self.clock)
            return Worker(self.app_dir)
        package = app_package.prepare(self.app_dir, self.config.data_dir, self.env, log.info)
        clock_file = None
        if isinstance(self.clock, VirtualClock):
            clock_file = self.clock.share(self.config.data_dir / "clock")
        return WorkerProcesses(package, self.env, count=process_count(self.env), clock_file=clock_file)

    def _lock_data_dir(self) -> None:
        """One host per data directory: so each timer occurrence and each work item runs once."""
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        lock = (self.config.data_dir / "host.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise HostError(f"another devhost is running on {self.config.data_dir}") from None
        self._lock_file = lock

    def _take_port(self) -> socket.socket:
        port = self.config.port
        try:
            return listen(port)
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            raise HostError(
                f"port {port} (HTTP) is in use: choose another with --port N or the DEVHOST_PORT "
                "setting (0 picks a free one)"
            ) from None

    def by_trigger(self, trigger_type: str) -> list[FunctionSpec]:
        return [f for f in self.functions if f.trigger_type == trigger_type]

    # --- what the sources expose (after start) ------------------------------------------------

    @property
    def servicebus(self) -> TriggerBus:
        """The bus the Service Bus triggers receive from: the local bus, or a broker."""
        return _started(self._servicebus).bus

    @property
    def engine(self) -> DurableEngine:
        return _started(self._durable).engine

    @property
    def store(self) -> DurableStore:
        return _started(self._durable).store

    @property
    def orchestrators(self) -> Mapping[str, FunctionSpec]:
        return _started(self._durable).orchestrators

    @property
    def activities(self) -> Mapping[str, FunctionSpec]:
        return _started(self._durable).activities

    @property
    def bound_port(self) -> int:
        return 0 if self._http is None else self._http.bound_port

    @property
    def base_url(self) -> str:
        return _started(self._http).base_url

    def client_json(self) -> str:
        """The Durable client binding: the SDK's own client talks to our Durable HTTP API."""
        return durable_api.client_binding(self.base_url)

    # --- invocation ---------------------------------------------------------------------------

    async def invoke(
        self,
        spec: FunctionSpec,
        trigger: rpc.TypedData,
        trigger_metadata: Mapping[str, rpc.TypedData] | None = None,
    ) -> rpc.InvocationResponse:
        """Every function runs here: an InvocationRequest to the worker, as the host sends it."""
        inputs = [bindings.binding(spec.trigger_param, trigger)]
        client = spec.client_param
        if client is not None:
            inputs.append(bindings.binding(client, bindings.durable_client(self.client_json())))
        self.invocations[spec.trigger_type] += 1
        self.invocations_by_function[spec.name] += 1
        outcomes = _started(self._outcomes)
        try:
            response = await self.worker.invoke(spec.function_id, inputs, trigger_metadata)
        except InvocationFailed as failed:
            outcomes.failed(spec.name, failed.message or type(failed).__name__, self.clock.now())
            raise
        outcomes.succeeded(spec.name)
        return response

    # --- driving ------------------------------------------------------------------------------

    def _pollers(self) -> list[Poller]:
        """Every trigger source's pollers, in the order a virtual-time pass runs them."""
        timers, durable = _started(self._timers), _started(self._durable)
        return [
            *([timers] if timers.specs else []),
            *_started(self._servicebus).triggers,
            durable.orchestration_poller,
            durable.activity_poller,
        ]

    async def pump(self) -> int:
        """One pass over every trigger source; returns how many items were processed."""
        done = 0
        for poller in self._pollers():
            done += await polling.step(poller)
        for source in self.extra_sources:
            done += source.step()
        return done

    def next_due(self) -> datetime | None:
        candidates = [
            _started(self._durable).next_due(),
            _started(self._servicebus).next_due(),
            _started(self._timers).next_due(),
            *(source.next_due() for source in self.extra_sources),
        ]
        due = [c for c in candidates if c is not None]
        return min(due) if due else None

    async def run_until(
        self,
        predicate: Callable[[], bool | Awaitable[bool]],
        *,
        max_virtual_time: timedelta = timedelta(days=7),
        max_rounds: int = 100_000,
    ) -> None:
        """Virtual-clock driver for tests: run until ``predicate`` holds."""
        if not isinstance(self.clock, VirtualClock):
            raise HostError("run_until needs a VirtualClock; use serve() with the system clock")
        deadline = self.clock.now() + max_virtual_time
        for _ in range(max_rounds):
            outcome = predicate()
            if isinstance(outcome, Awaitable):
                outcome = await outcome
            if outcome:
                return
            if await self.pump():
                continue
            due = self.next_due()
            if due is None:
                raise Idle("nothing left to run and the condition still does not hold")
            if due > deadline:
                raise Idle(f"the condition did not hold within {max_virtual_time} of virtual time")
            self.clock.advance_to(due)
        raise HostError(f"the condition did not hold within {max_rounds} rounds")

    async def serve(self) -> None:
        """Real-clock loops, one per poller, so a slow activity never holds up an orchestration.

        None polls on a fixed interval: each sleeps until it is told of work or the next thing it
        serves comes due, bounded by ``idle_wait``.
        - Durable: the engine says when it queued an event or an activity, so a result is
          replayed at once; a durable timer is slept on until its FireAt.
        - Service Bus on the local bus: one watcher sees every commit to the bus file, by any
          process, and each scheduled message or lock expiry as it comes due, and wakes the
          triggers. On a broker, the receive itself waits for a message.
        - NCRONTAB timers: until the next occurrence."""
        self._loops = [
            asyncio.create_task(polling.serve(poller, self.clock, self.idle_wait))
            for poller in self._pollers()
        ]
        servicebus = _started(self._servicebus)
        if servicebus.triggers and servicebus.watched:
            self._loops.append(asyncio.create_task(servicebus.watch(self.idle_wait)))
        await asyncio.gather(*self._loops)


def _started[T](source: T | None) -> T:
    if source is None:
        raise HostError("the host has not started")
    return source
