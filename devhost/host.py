"""The host: runs the indexed functions on their triggers, with the Durable engine behind them.

Two ways to drive it:
- ``serve`` (real clock): a background loop per trigger source, as ``func start`` runs them; each
  sleeps until it is told of work or something comes due, not for a fixed interval.
- ``run_until`` (virtual clock, tests): pump every source until the predicate holds; when
  nothing is runnable, jump the clock to the next due timer, schedule or message.
"""

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from http import HTTPStatus
from pathlib import Path
from typing import Any, Protocol, TextIO

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from azure.durable_functions.models.utils import http_utils as durable_http
from croniter import croniter

from adapters.clock import use_host_clock
from adapters.servicebus.clients import servicebus_client
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import MessageAlreadySettled, MessageLockLost, QueueConfig, ReceivedMessage
from devhost import app_package, bindings, durable_api
from devhost.clock import Clock, SystemClock, VirtualClock
from devhost.config import DevhostConfig, load_host_json, queues_from_emulator_config, route_prefix
from devhost.durable_engine import (
    ActivityOutcome,
    DurableEngine,
    EpisodeAbandoned,
    OrchestratorFailed,
    Queued,
)
from devhost.durable_store import ActivityWork, DurableStore
from devhost.indexing import FunctionSpec, IndexingError, index
from devhost.protocol import function_rpc_pb2 as rpc
from devhost.settings import SettingsError, load_local_settings
from devhost.worker import FunctionWorker, InvocationFailed, Worker, WorkerError
from devhost.worker_processes import WorkerDied, WorkerProcesses, process_count
from domain.timestamps import format_ts as ts
from domain.timestamps import parse_ts

log = logging.getLogger("devhost")

LOCAL_SERVICEBUS = "local"
# The longest an idle loop waits without being told of new work: a bound for what nothing
# announces (activity leases that ran out, a broker's receive that failed, a wall clock that
# jumped while asyncio's monotonic sleep did not) and a backstop should a wake-up ever be missed.
IDLE_WAIT = 1.0
# How often the bus watcher reads the local bus file's commit counter (what ``wait_for_commit``
# reads): a message hop waits half of it on average. 10 ms matches the eight 50 ms pollers per
# queue it replaces (the first of eight random phases came after ~6 ms) at a sixth of their idle
# CPU (bench/devhost_idle.py); each wake-up, not the read, is most of that cost.
COMMIT_CHECK_INTERVAL = 0.01
# Kestrel's default request limits, which the Functions host enforces before any function runs:
# a longer request line is refused with 414, more or larger headers with 431.
MAX_REQUEST_LINE_SIZE = 8 * 1024
MAX_REQUEST_HEADERS_TOTAL_SIZE = 32 * 1024
MAX_REQUEST_HEADER_COUNT = 100


class HostError(Exception):
    pass


class Idle(HostError):
    """Nothing is runnable and nothing is scheduled, yet the awaited condition does not hold."""


class ExtraSource(Protocol):
    def step(self) -> int:
        """Do what is due now; return how many items were handled."""
        ...

    def next_due(self) -> datetime | None: ...


class TriggerBus(Protocol):
    """What the Service Bus trigger loop needs: the local bus, or a broker via the SDK."""

    def queues(self) -> list[QueueConfig]: ...
    def receive(self, queue: str, max_messages: int) -> list[ReceivedMessage]: ...
    def complete(self, message: ReceivedMessage) -> None: ...
    def abandon(self, message: ReceivedMessage) -> None: ...
    def renew_lock(self, message: ReceivedMessage) -> datetime: ...
    def next_due(self) -> datetime | None: ...
    def close(self) -> None: ...


class Host:
    def __init__(
        self,
        app_dir: Path,
        *,
        clock: Clock | None = None,
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
        # Read first, as the Functions host reads it before it starts a worker: a bad one is a
        # start-up error, not a traceback after the workers are up.
        self.host_json = load_host_json(self.app_dir)
        self.clock: Clock = clock or SystemClock()
        self.idle_wait = idle_wait
        self.functions: list[FunctionSpec] = []
        self._lock_file: TextIO | None = None
        self._runner: web.AppRunner | None = None
        self._pool = ThreadPoolExecutor(max_workers=max(4, self.config.concurrency * 2))
        self._loops: list[asyncio.Task[None]] = []
        self._next_fire: dict[str, datetime] = {}
        self.bound_port = 0
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

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._lock_data_dir()
        # Set before the workers start, which take their environment with them: the app's
        # embedded messaging adapter and agent processes open the same local bus file.
        self.env["LOCAL_SERVICEBUS_PATH"] = str(self.config.servicebus_path)
        try:
            self.worker = self._worker()
            loaded = await self.worker.start()
        except (WorkerError, app_package.PackageError) as error:
            raise IndexingError(str(error)) from None
        self.functions = index(loaded, self.env)
        self.servicebus = self._trigger_bus()
        self._check_servicebus_triggers()
        self.store = DurableStore(self.config.data_dir / "durable.db")
        self.orchestrators = {f.name: f for f in self.by_trigger("orchestrationTrigger")}
        self.engine = DurableEngine(
            self.store, self.clock, frozenset(self.orchestrators), self._run_orchestrator
        )
        self.engine.release_activity_leases()
        self.activities = {f.name: f for f in self.by_trigger("activityTrigger")}
        await self._start_http()
        await self._start_timers()

    async def stop(self) -> None:
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loops.clear()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self._pool.shutdown(wait=True, cancel_futures=True)
        await self.worker.stop()
        # The Durable SDK keeps one aiohttp session per process; close it with the host so no
        # "unclosed session" warning is left behind. Guarded: it is not public API.
        close_session = getattr(durable_http, "_close_session", None)
        if close_session is not None:
            await close_session()
        # A host whose start failed part way has only some of these.
        if hasattr(self, "servicebus"):
            self.servicebus.close()
        if hasattr(self, "store"):
            self.store.close()
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

    def by_trigger(self, trigger_type: str) -> list[FunctionSpec]:
        return [f for f in self.functions if f.trigger_type == trigger_type]

    def _connection(self, spec: FunctionSpec) -> str:
        name = str(spec.trigger.get("connection") or "")
        value = self.env.get(name) or self.env.get(f"{name}__fullyQualifiedNamespace")
        if not value:
            raise SettingsError(f"function {spec.name}: connection setting {name!r} is not set")
        return value

    def _trigger_bus(self) -> TriggerBus:
        """the local bus when the triggers' connection is "local", else the broker it names
        (a connection string, or a namespace reached with DefaultAzureCredential)."""
        declared = (
            queues_from_emulator_config(self.config.servicebus_config)
            if self.config.servicebus_config is not None
            else []
        )
        connections = {self._connection(spec) for spec in self.by_trigger("serviceBusTrigger")}
        if len(connections) > 1:
            raise SettingsError("devhost runs Service Bus triggers on one connection; these differ")
        if not connections or connections == {LOCAL_SERVICEBUS}:
            bus = LocalServiceBus(self.config.servicebus_path, clock=self.clock.now)
            for queue in declared:
                bus.declare(queue)
            return bus
        if isinstance(self.clock, VirtualClock):
            raise SettingsError("a real Service Bus runs on real time: use serve(), not a virtual clock")
        from devhost.servicebus_broker import BrokerServiceBus  # noqa: PLC0415

        return BrokerServiceBus(servicebus_client(connections.pop()), declared)

    def _check_servicebus_triggers(self) -> None:
        declared = {q.name for q in self.servicebus.queues()}
        for spec in self.by_trigger("serviceBusTrigger"):
            queue = str(spec.trigger["queueName"]).lower()
            if queue not in declared:
                raise SettingsError(
                    f"function {spec.name}: queue {queue!r} is not declared in the Service Bus config "
                    f"({self.config.servicebus_config or 'none found: set DEVHOST_SERVICEBUS_CONFIG'})"
                )

    # --- HTTP: triggers and the Durable HTTP API ------------------------------------------------

    async def _start_http(self) -> None:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        prefix = self._route_prefix()
        for spec in self.by_trigger("httpTrigger"):
            route = str(spec.trigger.get("route") or spec.name)
            path = "/" + "/".join(p for p in (prefix, _aiohttp_route(route, spec.name)) if p)
            methods = spec.trigger.get("methods") or ["*"]
            for method in methods:
                app.router.add_route(str(method).upper(), path, functools.partial(self._http_handler, spec))
        durable_api.register(app, self.engine, lambda: self.base_url)
        app.middlewares.append(_kestrel_limits)
        self._runner = _AppRunner(
            app,
            access_log=None,
            # Refused by the parser, before any handler: a request line (the URL, to aiohttp's C
            # parser) over Kestrel's limit, a header line over the limit for all of them, too many
            # headers (its pure-Python parser counts the request line and the blank line too).
            # What gets past is measured as Kestrel measures it by _kestrel_limits.
            max_line_size=MAX_REQUEST_LINE_SIZE,
            max_field_size=MAX_REQUEST_HEADERS_TOTAL_SIZE,
            max_headers=MAX_REQUEST_HEADER_COUNT + 2,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.config.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.config.port

    def _route_prefix(self) -> str:
        return route_prefix(self.host_json)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.bound_port}"

    def client_json(self) -> str:
        """The Durable client binding: the SDK's own client talks to our Durable HTTP API."""
        return durable_api.client_binding(self.base_url)

    async def _http_handler(self, spec: FunctionSpec, request: web.Request) -> web.StreamResponse:
        data, metadata = bindings.http_request(
            method=request.method,
            url=str(request.url),
            headers=request.headers,
            query=request.query,
            route_params=request.match_info,
            body=await request.read(),
        )
        try:
            response = await self.invoke(spec, data, metadata)
        except InvocationFailed as error:  # an unhandled function error is a 500, as in Azure
            log.error("function %s failed: %s\n%s", spec.name, error.message, error.stack_trace)
            return web.Response(status=500, text="Internal Server Error")
        reply = bindings.http_reply(response)
        return web.Response(status=reply.status, body=reply.body, headers=reply.headers)

    # --- invocation ---------------------------------------------------------------------------

    async def invoke(
        self,
        spec: FunctionSpec,
        trigger: rpc.TypedData,
        trigger_metadata: dict[str, rpc.TypedData] | None = None,
    ) -> rpc.InvocationResponse:
        """Every function runs here: an InvocationRequest to the worker, as the host sends it."""
        inputs = [bindings.binding(spec.trigger_param, trigger)]
        client = spec.client_param
        if client is not None:
            inputs.append(bindings.binding(client, bindings.durable_client(self.client_json())))
        self.invocations[spec.trigger_type] += 1
        self.invocations_by_function[spec.name] += 1
        return await self.worker.invoke(spec.function_id, inputs, trigger_metadata)

    # --- timers (NCRONTAB) --------------------------------------------------------------------

    async def _start_timers(self) -> None:
        now = self.clock.now()
        for spec in self.by_trigger("timerTrigger"):
            schedule = str(spec.trigger["schedule"])
            if not croniter.is_valid(schedule, second_at_beginning=True) or len(schedule.split()) != 6:
                raise SettingsError(
                    f"function {spec.name}: {schedule!r} is not a six-field NCRONTAB expression "
                    "(second minute hour day month day-of-week)"
                )
            last = self._last_fired(spec.name)
            missed = last is not None and self._next_after(spec, last) <= now
            if spec.trigger.get("runOnStartup") or (spec.trigger.get("useMonitor", True) and missed):
                await self._fire_timer(spec, past_due=bool(missed), scheduled=now)
            self._next_fire[spec.name] = self._next_after(spec, now)

    def _next_after(self, spec: FunctionSpec, moment: datetime) -> datetime:
        schedule = str(spec.trigger["schedule"])
        nxt: datetime = croniter(schedule, moment, second_at_beginning=True).get_next(datetime)
        return nxt

    def _last_fired(self, name: str) -> datetime | None:
        stamp = self.store.last_fired(name)
        return parse_ts(stamp) if stamp is not None else None

    async def _fire_timer(self, spec: FunctionSpec, *, past_due: bool, scheduled: datetime) -> None:
        with self.store.tx() as tx:
            tx.record_fired(spec.name, ts(scheduled))
        info, metadata = bindings.timer_info(
            past_due=past_due,
            last=scheduled,
            next_=self._next_after(spec, scheduled),
            now=self.clock.now(),
            monitored=bool(spec.trigger.get("useMonitor", True)),
        )
        try:
            await self.invoke(spec, info, metadata)
        except InvocationFailed as error:  # a failing timer function must not stop its schedule
            log.error("timer function %s failed: %s\n%s", spec.name, error.message, error.stack_trace)

    async def step_timers(self) -> int:
        now = self.clock.now()
        fired = 0
        for spec in self.by_trigger("timerTrigger"):
            due = self._next_fire[spec.name]
            if due <= now:
                # Occurrences missed while the clock jumped fire once, as past due, like Azure.
                past_due = self._next_after(spec, due) <= now
                self._next_fire[spec.name] = self._next_after(spec, now)
                await self._fire_timer(spec, past_due=past_due, scheduled=due)
                fired += 1
        return fired

    # --- Service Bus triggers -----------------------------------------------------------------

    async def step_servicebus(self, spec: FunctionSpec, limit: int) -> int:
        queue = str(spec.trigger["queueName"])
        loop = asyncio.get_running_loop()
        messages = await loop.run_in_executor(self._pool, lambda: self.servicebus.receive(queue, limit))
        self.servicebus_operations["receive"] += 1
        await asyncio.gather(*(self._handle_message(spec, m) for m in messages))
        return len(messages)

    async def _handle_message(self, spec: FunctionSpec, message: ReceivedMessage) -> None:
        renewer = asyncio.create_task(self._renew_lock(message))
        try:
            body, metadata = bindings.servicebus_message(message)
            await self.invoke(spec, body, metadata)
        except (InvocationFailed, bindings.UndecodableBody) as error:
            # A failure means abandon: the broker counts deliveries and dead-letters at the limit.
            log.warning(
                "function %s failed on message %s (delivery %d): %s",
                spec.name,
                message.message_id,
                message.delivery_count,
                error,
            )
            settle: Callable[[ReceivedMessage], None] = self.servicebus.abandon
        else:
            settle = self.servicebus.complete
        finally:
            renewer.cancel()
            # A renewer that failed must not keep the message from being settled.
            await asyncio.gather(renewer, return_exceptions=True)
        try:
            self.servicebus_operations[settle.__name__] += 1
            await asyncio.get_running_loop().run_in_executor(self._pool, settle, message)
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
        if isinstance(self.clock, VirtualClock):
            return  # virtual time only moves while the host is idle: a lock cannot expire mid-call
        locked_until = message.locked_until
        while True:
            await asyncio.sleep(max((locked_until - self.clock.now()).total_seconds() / 2, 0.01))
            try:
                self.servicebus_operations["renew_lock"] += 1
                locked_until = await asyncio.get_running_loop().run_in_executor(
                    self._pool, self.servicebus.renew_lock, message
                )
            except MessageLockLost:
                return  # settled meanwhile (e.g. dead-lettered by the function), or really lost
            except Exception:  # a passing broker error: try again at the next interval
                log.exception("renewing the lock on message %s failed", message.message_id)
                locked_until = self.clock.now() + timedelta(seconds=1)

    # --- Durable: orchestrations and activities ---------------------------------------------

    async def step_orchestrations(self) -> int:
        ready = self.engine.ready_instances()
        await self.engine.run_episodes(ready)
        return len(ready)

    async def _run_orchestrator(self, name: str, context_json: str, fields: dict[str, Any]) -> str:
        spec = self.orchestrators[name]
        try:
            response = await self.invoke(
                spec, *bindings.orchestration_context(spec.trigger_param, context_json, fields)
            )
        except WorkerDied as error:
            log.warning("orchestrator %s: %s; its episode runs again", name, error.message)
            raise EpisodeAbandoned(error.message) from None
        except InvocationFailed as error:
            raise OrchestratorFailed(error.message) from None
        state = bindings.returned_json(response)
        if state is None:
            raise OrchestratorFailed(f"orchestrator function '{name}' returned no state")
        return state

    async def step_activities(self, limit: int) -> int:
        work = self.engine.claim_activities(limit)
        self.engine.finish_activities(
            list(await asyncio.gather(*(self._run_activity(item) for item in work)))
        )
        return len(work)

    async def _run_activity(self, work: ActivityWork) -> ActivityOutcome:
        spec = self.activities.get(work.name)
        if spec is None:
            return ActivityOutcome(
                work, failure=(f"activity function '{work.name}' does not exist in the app", "")
            )
        try:
            response = await self.invoke(
                spec, *bindings.activity_input(spec.trigger_param, work.instance_id, work.input)
            )
        except InvocationFailed as error:  # an activity's exception is the task's failure
            reason = f"Activity function '{work.name}' failed: {error.message}"
            return ActivityOutcome(work, failure=(reason, error.stack_trace))
        return ActivityOutcome(work, result=bindings.returned_json(response))

    # --- driving ------------------------------------------------------------------------------

    async def pump(self) -> int:
        """One pass over every trigger source; returns how many items were processed."""
        done = await self.step_timers()
        for spec in self.by_trigger("serviceBusTrigger"):
            done += await self.step_servicebus(spec, self.config.concurrency)
        done += await self.step_orchestrations()
        done += await self.step_activities(self.config.concurrency)
        for source in self.extra_sources:
            done += source.step()
        return done

    def next_due(self) -> datetime | None:
        candidates = [
            self.engine.next_due(),
            self.servicebus.next_due(),
            *self._next_fire.values(),
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
        """Real-clock loops, one per source, so a slow activity never holds up an orchestration.

        None polls on a fixed interval: each sleeps until it is told of work or the next thing it
        serves comes due, bounded by ``idle_wait``.
        - Durable: the engine says when it queued an event or an activity, so a result is
          replayed at once; a durable timer is slept on until its FireAt.
        - Service Bus on the local bus: one watcher sees every commit to the bus file, by any
          process, and each scheduled message or lock expiry as it comes due, and wakes the
          trigger loops. On a broker, the receive itself waits for a message.
        - NCRONTAB timers: until the next occurrence."""
        self._durable_changed = asyncio.Event()
        self._activity_slots = asyncio.Event()
        wake = {Queued.EVENTS: self._durable_changed, Queued.ACTIVITIES: self._activity_slots}
        self.engine.changed = lambda queued: wake[queued].set()
        triggers = [(spec, asyncio.Event()) for spec in self.by_trigger("serviceBusTrigger")]
        watched = isinstance(self.servicebus, LocalServiceBus)
        self._loops = [
            asyncio.create_task(self._serve_servicebus(spec, event, watched=watched))
            for spec, event in triggers
        ]
        if triggers and watched:
            wakes = [event for _, event in triggers]
            self._loops.append(asyncio.create_task(self._watch_bus(self.config.servicebus_path, wakes)))
        if self.by_trigger("timerTrigger"):
            self._loops.append(asyncio.create_task(self._serve_timers()))
        self._loops += [
            asyncio.create_task(self._serve_orchestrations()),
            asyncio.create_task(self._serve_activities()),
        ]
        await asyncio.gather(*self._loops)

    async def _idle(self, event: asyncio.Event | None, due: datetime | None = None) -> None:
        """Until ``event`` is set or ``due`` comes, and no longer than ``idle_wait``."""
        wait = self.idle_wait
        if due is not None:
            wait = min(wait, max((due - self.clock.now()).total_seconds(), 0))
        if event is None:
            await asyncio.sleep(wait)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=wait)

    async def _serve_timers(self) -> None:
        """Asleep until the next NCRONTAB occurrence. ``_idle`` still bounds the sleep: asyncio
        sleeps on the monotonic clock, which a suspended laptop or a stepped wall clock leaves
        behind, and occurrences are on the wall clock."""
        while True:
            try:
                await self.step_timers()
            except Exception:  # keep serving; the cause is in the log
                log.exception("devhost timer loop failed")
            await self._idle(None, min(self._next_fire.values()))

    async def _watch_bus(self, path: Path, wakes: list[asyncio.Event]) -> None:
        """Wake the Service Bus trigger loops when a message may have become receivable: a commit
        to the bus file by any connection (the app's worker process, an agent, this host's own
        receives and settlements), or the earliest scheduled message or lock expiry coming due.

        The commit counter is read here, on the event loop, rather than by ``wait_for_commit`` in
        a thread, which could not be cancelled when the host stops. The connection is the
        watcher's own and never writes: SQLite's ``data_version`` counts only other connections'
        commits, so a connection that also sent would not see its own sends."""
        bus = LocalServiceBus(path, clock=self.clock.now)
        try:
            seen = bus.commit_marker()
            due = bus.next_due()
            while True:
                await asyncio.sleep(COMMIT_CHECK_INTERVAL)
                try:
                    marker = bus.commit_marker()
                    if marker == seen and (due is None or due > self.clock.now()):
                        continue
                    # The counter is read before the loops wake, so none misses a commit: a loop
                    # receives after this read and sees what came before it, and anything later
                    # moves the counter again.
                    seen, due = marker, bus.next_due()
                except Exception:  # the loops still receive, on their idle_wait; the cause is in the log
                    log.exception("devhost Service Bus watcher failed")
                    await asyncio.sleep(self.idle_wait)
                for wake in wakes:
                    wake.set()
        finally:
            bus.close()

    async def _serve_servicebus(self, spec: FunctionSpec, wake: asyncio.Event, *, watched: bool) -> None:
        """Up to DEVHOST_CONCURRENCY messages of one function at a time, as activities run: one
        receive asks for as many messages as there are free slots, so a commit wakes one receive
        per function rather than one per slot (each takes the bus file's write lock).

        ``watched``: ``_watch_bus`` sets ``wake`` when there may be something to receive. A broker
        has no watcher; its receive waits for a message by itself (``max_wait_time``)."""
        queue = str(spec.trigger["queueName"])
        running: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()

        def done(task: asyncio.Task[None]) -> None:
            running.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log.error("a message task of %s failed", spec.name, exc_info=task.exception())
            wake.set()

        try:
            while True:
                # Cleared before the receive, not after: a commit reported while the receive runs
                # must end the wait below at once, or its message waits for idle_wait.
                wake.clear()
                free = self.config.concurrency - len(running)
                if free > 0:
                    try:
                        messages = await loop.run_in_executor(
                            self._pool, self.servicebus.receive, queue, free
                        )
                        self.servicebus_operations["receive"] += 1
                    except Exception:  # keep serving; the cause is in the log
                        log.exception("devhost could not receive from %s for %s", queue, spec.name)
                    else:
                        for message in messages:
                            task = asyncio.create_task(self._handle_message(spec, message))
                            running.add(task)
                            task.add_done_callback(done)
                        if not watched:
                            continue  # a broker's receive has waited for a message already
                await self._idle(wake)
        finally:
            # Stopping: what is still running is given up; its lock runs out and the message is
            # delivered again (at least once, as in Azure).
            for task in list(running):
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    async def _serve_orchestrations(self) -> None:
        """Every ready instance's episode at once: the worker runs them on its own threads."""
        changed = self._durable_changed
        while True:
            changed.clear()
            try:
                if await self.step_orchestrations():
                    continue
            except Exception:  # keep serving; the cause is in the log
                log.exception("devhost orchestration loop failed")
            await self._idle(changed, self.engine.next_due())

    async def _serve_activities(self) -> None:
        """Up to DEVHOST_CONCURRENCY activities at a time, a new one as soon as a slot frees.
        Results that arrive together are committed together (group commit)."""
        running: set[asyncio.Task[ActivityOutcome]] = set()
        finished: list[ActivityOutcome] = []
        wake = self._activity_slots
        loop = asyncio.get_running_loop()

        def commit() -> None:
            outcomes = finished[:]
            finished.clear()
            try:
                self.engine.finish_activities(outcomes)
            except Exception:  # the activities run again after a restart: at least once
                log.exception("devhost could not record %d activity results", len(outcomes))

        def done(task: asyncio.Task[ActivityOutcome]) -> None:
            running.discard(task)
            if task.cancelled():
                pass  # the host is stopping: the activity runs again after a restart
            elif task.exception() is not None:
                log.error("activity task failed outside the function", exc_info=task.exception())
            else:
                if not finished:
                    loop.call_soon(commit)
                finished.append(task.result())
            wake.set()

        try:
            while True:
                wake.clear()
                free = self.config.concurrency - len(running)
                try:
                    work = self.engine.claim_activities(free) if free > 0 else []
                except Exception:  # keep serving; the cause is in the log
                    log.exception("devhost activity loop failed")
                    work = []
                for item in work:
                    task = asyncio.create_task(self._run_activity(item))
                    running.add(task)
                    task.add_done_callback(done)
                if not work:
                    await self._idle(wake)
        finally:
            # Stopping: what finished is recorded now, while the store is open; what still runs
            # is abandoned and runs again after a restart (at least once, as in Azure).
            for task in list(running):
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            commit()


def _refusal(error: BaseException | None) -> tuple[HTTPStatus, str] | None:
    """Kestrel's answer to a request over its limits, as aiohttp's parser reports it; None for any
    other bad request. Which limit a ``LineTooLong`` hit tells the request line from a header."""
    if isinstance(error, LineTooLong):
        limit = error.args[1]
        if limit == MAX_REQUEST_LINE_SIZE:
            return HTTPStatus.REQUEST_URI_TOO_LONG, f"a request line over {limit} bytes"
        return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"a header line over {limit} bytes"
    if isinstance(error, BadHttpMessage) and error.message == "Too many headers received":
        return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "too many headers"
    return None


def _log_refusal(remote: str | None, status: HTTPStatus, why: str) -> None:
    # A client's mistake, not devhost's: one line, as Kestrel logs a bad request, no traceback.
    log.info("refused a request from %s: %d %s (%s)", remote, status.value, status.phrase, why)


class _HttpProtocol(web.RequestHandler):
    """aiohttp's connection handler, answering a request over Kestrel's limits as Kestrel does:
    414 or 431 and a closed connection, where aiohttp answers 400 and logs a traceback."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        refusal = _refusal(exc)
        if refusal is None:
            return super().handle_error(request, status, exc, message)
        _log_refusal(request.remote, *refusal)
        response = web.Response(status=refusal[0])
        response.force_close()
        return response


class _HttpServer(web.Server):
    def __call__(self) -> web.RequestHandler:
        # As aiohttp's own, with the handler class above.
        return _HttpProtocol(self, loop=self._loop, **self._kwargs)


class _AppRunner(web.AppRunner):
    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _HttpServer  # only __call__ differs: the state is aiohttp's own
        return server


@web.middleware
async def _kestrel_limits(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Kestrel's limits to the byte and the header, where aiohttp's parser counts differently:
    the request line with its CRLF (aiohttp's C parser counts the URL alone), every header line,
    ``name: value`` and CRLF, together (aiohttp counts each line on its own), and the headers."""
    target = request.raw_path.encode("utf-8", "surrogateescape")  # as aiohttp decoded the bytes
    line = len(request.method) + len(target) + len("  HTTP/1.1\r\n")
    headers = sum(len(name) + len(value) + len(": \r\n") for name, value in request.raw_headers)
    if line > MAX_REQUEST_LINE_SIZE:
        refusal = HTTPStatus.REQUEST_URI_TOO_LONG, f"a request line of {line} bytes"
    elif headers > MAX_REQUEST_HEADERS_TOTAL_SIZE:
        refusal = HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"{headers} bytes of headers"
    elif len(request.raw_headers) > MAX_REQUEST_HEADER_COUNT:
        refusal = HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"{len(request.raw_headers)} headers"
    else:
        return await handler(request)
    _log_refusal(request.remote, *refusal)
    response = web.Response(status=refusal[0])
    response.force_close()
    return response


def _aiohttp_route(route: str, function_name: str) -> str:
    """Functions route templates → aiohttp: ``{id}`` stays, ``{id:int}`` drops its constraint."""
    parts = []
    for segment in route.strip("/").split("/"):
        if not (segment.startswith("{") and segment.endswith("}")):
            parts.append(segment)
            continue
        name = segment[1:-1].split(":", 1)[0]
        if name.endswith("?") or name.startswith("*"):
            raise SettingsError(f"function {function_name}: route parameter {segment} is not supported")
        parts.append("{" + name + "}")
    return "/".join(parts)
