"""``python -m ops dashboard``: the operator's picture on a local page, live (docs/operating.md).

The same panels as the Azure workbook (infra/workbooks/operator.workbook.json), fed from what this
machine holds: the app's stores, through the same ports the app builds (state records, the
compensation log, the queues), and the JSON-lines telemetry under ``SAS_TELEMETRY_DIR``
(adapters/telemetry_export.py). Read-only: nothing here writes to a store or sends a message.

It serves on loopback only (127.0.0.1): the page shows order data and takes no credentials, so it
is for the operator at this machine. The page polls ``/api/summary`` every second; charts are
drawn by uPlot, vendored in ``ops/static/`` (nothing is fetched at run time, no build step).
"""

import asyncio
import contextlib
import dataclasses
import errno
import json
import math
import os
import signal
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from aiohttp import web
from rich.console import Console

from adapters.clock import host_clock
from adapters.servicebus.messages import dead_letter_queue
from bootstrap import build_ports
from domain.states import OrderStatus, ProcessState
from ops import function_failures, outage_view, replay_history, timeline
from ops.errors import BadArgument
from services.context import Ports
from settings import Settings

STATIC = Path(__file__).resolve().parent / "static"
LOOPBACK = "127.0.0.1"
FAILED_STATES = (ProcessState.ERROR, ProcessState.COMPENSATION_FAILED)
IN_FLIGHT_STATES = frozenset({ProcessState.PROCESSING, ProcessState.COMPENSATING})
FINAL_STATUSES = frozenset(
    {OrderStatus.COMPLETED, OrderStatus.FAILED, OrderStatus.COMPENSATED, OrderStatus.COMPENSATION_FAILED}
)
HISTORY = 900  # samples of the store's counts the page can chart (15 minutes at one a second)
LIMIT = 1000  # messages peeked, records listed: an operator's view, not an export
T = TypeVar("T")


@runtime_checkable
class Browsable(Protocol):
    """What the messaging adapters offer operators to read a queue without changing it."""

    def peek(self, queue: str, limit: int) -> Sequence[Any]: ...


@dataclass
class TelemetryFiles:
    """The JSON-lines files one directory holds, read incrementally (only what was appended)."""

    directory: Path | None
    _offsets: dict[Path, int] = field(default_factory=dict)
    # Counters are cumulative per process (the SDK's default temporality): the latest point per
    # (file, process start, name, attributes); a process is told apart by its start time, since
    # devhost's worker processes share one file per service.
    _points: dict[tuple[str, int, str, str], float] = field(default_factory=dict)
    _gauges: dict[str, tuple[int, float]] = field(default_factory=dict)
    spans: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by OrderID

    def _new_lines(self, pattern: str) -> Iterator[tuple[Path, dict[str, Any]]]:
        if self.directory is None or not self.directory.is_dir():
            return
        for path in sorted(self.directory.glob(pattern)):
            with path.open("rb") as file:
                file.seek(self._offsets.get(path, 0))
                data = file.read()
            complete = data.rfind(b"\n") + 1  # a line being written is read next time
            self._offsets[path] = self._offsets.get(path, 0) + complete
            for line in data[:complete].splitlines():
                if line.strip():
                    try:
                        yield path, json.loads(line)
                    except json.JSONDecodeError:
                        continue

    def refresh(self) -> None:
        for path, batch in self._new_lines("*.metrics.jsonl"):
            for resource in batch.get("resource_metrics", []):
                for scope in resource.get("scope_metrics", []):
                    for metric in scope.get("metrics", []):
                        self._metric(path.name, metric)
        for _, span in self._new_lines("*.spans.jsonl"):
            order_id = (span.get("attributes") or {}).get("sas.order_id")
            if isinstance(order_id, str):
                self.spans.setdefault(order_id, []).append(span)

    def _metric(self, file: str, metric: dict[str, Any]) -> None:
        name = str(metric.get("name"))
        data = metric.get("data") or {}
        for point in data.get("data_points", []):
            value = float(point.get("value") or 0)
            at = int(point.get("time_unix_nano") or 0)
            if "aggregation_temporality" not in data:  # a gauge: the latest value wins
                if at >= self._gauges.get(name, (0, 0.0))[0]:
                    self._gauges[name] = (at, value)
                continue
            attributes = json.dumps(point.get("attributes") or {}, sort_keys=True)
            self._points[(file, int(point.get("start_time_unix_nano") or 0), name, attributes)] = value

    def totals(self, name: str, by: str | None = None) -> dict[str, float]:
        found: dict[str, float] = {}
        for (_, _, metric, attributes), value in self._points.items():
            if metric == name:
                key = str(json.loads(attributes).get(by, "")) if by else "total"
                found[key] = found.get(key, 0.0) + value
        return found

    def total(self, name: str) -> float:
        return sum(self.totals(name).values())

    def gauge(self, name: str) -> float | None:
        return self._gauges[name][1] if name in self._gauges else None


def _when(span: dict[str, Any], key: str) -> datetime:
    return datetime.fromisoformat(str(span[key]).replace("Z", "+00:00"))


def percentile(values: list[float], share: float) -> float | None:
    """Nearest rank, as Kusto's percentile() approximates it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share / 100 * len(ordered)) - 1)]


def _app_of(spans: list[dict[str, Any]]) -> str | None:
    for span in spans:
        if span.get("name") == "submission":
            return (span.get("attributes") or {}).get("app")
    return None


class Picture:
    """What the page shows, read from the stores and the telemetry. Every method runs on one thread
    (``Dashboard.run``): the SQLite adapters keep a connection per thread."""

    def __init__(self, ports: Ports, telemetry: TelemetryFiles) -> None:
        self.ports = ports
        self.settings: Settings = ports.settings
        self.telemetry = telemetry
        self.history: list[dict[str, Any]] = []

    @property
    def bus(self) -> Browsable | None:
        bus = self.ports.settlement
        return bus if isinstance(bus, Browsable) else None

    def queues(self) -> list[str]:
        s = self.settings
        fixed = [s.orders_queue, s.agent_requests_queue, s.agent_replies_queue, s.alerts_queue]
        return fixed + [f"status-{app.name}" for app in s.submitters.apps]

    def summary(self, app: str | None) -> dict[str, Any]:
        self.telemetry.refresh()
        states = self.ports.states
        counts = {s.value: states.count_in_states(frozenset({s})) for s in ProcessState}
        now = self.ports.clock.now()
        pending = counts[ProcessState.PENDING.value]
        in_flight = sum(counts[s.value] for s in IN_FLIGHT_STATES)
        sample = {"t": now.timestamp(), "states": counts, "backlog": pending, "in_flight": in_flight}
        if not self.history or sample["t"] > self.history[-1]["t"] or sample != self.history[-1]:
            self.history = [*self.history, sample][-HISTORY:]
        bus = self.bus
        alerts: Counter[str] = Counter()
        dead_letters: dict[str, int | None] = {}
        if bus is not None:
            for message in bus.peek(self.settings.alerts_queue, LIMIT):
                alerts[str(json.loads(message.body).get("Event"))] += 1
            dead_letters = {queue: len(bus.peek(dead_letter_queue(queue), LIMIT)) for queue in self.queues()}
        else:
            dead_letters = {queue: None for queue in self.queues()}
        t = self.telemetry
        return {
            "at": now.isoformat(),
            "profile": self.settings.profile,
            "apps": [a.name for a in self.settings.submitters.apps],
            "app": app,
            "states": counts,
            "history": self.history,
            "backlog": {
                "pending": pending,
                "in_flight": in_flight,
                "threshold": self.settings.backlog_threshold,
                "cap": self.settings.max_in_flight,
                "gauge_backlog": t.gauge("sas.backlog"),
                "gauge_in_flight": t.gauge("sas.in_flight"),
            },
            "transitions": t.totals("sas.transitions", "to_state"),
            "supervisor": {
                "recoveries": t.totals("sas.supervisor.recoveries", "outcome"),
                "cost": t.total("sas.supervisor.cost"),
                "pages": t.total("sas.supervisor.pages"),
                "items": t.total("sas.supervisor.items"),
            },
            "alerts": dict(alerts),
            "alerts_metric": t.totals("sas.alerts", "event"),
            "agent": {
                "calls": t.totals("sas.agent.calls", "outcome"),
                "retries": t.total("sas.agent.retries"),
                "breaker_rejections": t.total("sas.agent.breaker_rejections"),
            },
            "latency": self.latency(app),
            "dead_letters": dead_letters,
            "failed": self.failed(app),
            "functions": function_failures.failing(function_failures.outcomes(os.environ)),
            **self.waiting(states),
        }

    @staticmethod
    def waiting(states: Any) -> dict[str, Any]:
        """Orders waiting on each dependency, as ``ops watch`` counts them (``ops.outage_view``),
        and whether every record was read (False: the counts are a floor)."""
        found = outage_view.waiting_on(states, LIMIT)
        return {"waiting_on": found.by_dependency, "waiting_on_complete": found.complete}

    def latency(self, app: str | None) -> dict[str, Any]:
        """Submission to final status, per order, from the spans of its trace (as the workbook)."""
        seconds: list[float] = []
        for spans in self.telemetry.spans.values():
            if app and _app_of(spans) != app:
                continue
            submitted = [_when(s, "start_time") for s in spans if s.get("name") == "submission"]
            finished = [
                _when(s, "start_time")
                for s in spans
                if s.get("name") == "status" and (s.get("attributes") or {}).get("status") in FINAL_STATUSES
            ]
            if submitted and finished:
                seconds.append((max(finished) - min(submitted)).total_seconds())
        return {"orders": len(seconds), "p50": percentile(seconds, 50), "p95": percentile(seconds, 95)}

    def failed(self, app: str | None) -> list[dict[str, Any]]:
        rows = []
        for state in FAILED_STATES:
            for stored in self.ports.states.query_in_state(state, LIMIT):
                record = stored.record
                if app and record.StatusQueue != f"status-{app}":
                    continue
                rows.append(
                    {
                        "OrderID": record.OrderID,
                        "ProcessState": record.ProcessState.value,
                        "FailedStep": record.FailedStep,
                        "LastError": record.LastError,
                        "UpdatedAt": record.UpdatedAt.isoformat(),
                    }
                )
        return sorted(rows, key=lambda r: str(r["UpdatedAt"]), reverse=True)[:50]

    def order(self, order_id: str) -> dict[str, Any] | None:
        """One order's timeline: its state record, compensation log, status messages, alerts and
        the spans of its trace (claims, activities, agent requests and calls, replies, the
        Supervisor's recoveries), oldest first."""
        stored = self.ports.states.get(order_id)
        if stored is None:
            return None
        self.telemetry.refresh()
        record = stored.record
        events: list[dict[str, Any]] = [
            {"at": record.CreatedAt.isoformat(), "source": "record", "what": "record created", "detail": ""}
        ]
        for span in self.telemetry.spans.get(order_id, []):
            attributes = {
                k: v for k, v in (span.get("attributes") or {}).items() if not k.startswith("sas.order")
            }
            events.append(
                {
                    "at": _when(span, "start_time").isoformat(),
                    "source": "span",
                    "what": span.get("name"),
                    "detail": ", ".join(f"{k}={v}" for k, v in sorted(attributes.items())),
                }
            )
        entries = self.ports.compensation_log.entries(order_id)
        for entry in entries:
            events.append(
                {
                    "at": entry.RecordedAt.isoformat(),
                    "source": "compensation",
                    "what": f"compensation recorded for {entry.Step} ({entry.Action})",
                    "detail": "",
                }
            )
            if entry.OutcomeAt is not None:
                outcome = entry.Outcome.value if entry.Outcome else ""
                events.append(
                    {
                        "at": entry.OutcomeAt.isoformat(),
                        "source": "compensation",
                        "what": f"{entry.Step} compensation {outcome}",
                        "detail": entry.Error or "",
                    }
                )
        statuses: list[dict[str, Any]] = []
        bus = self.bus
        if bus is not None:
            if record.StatusQueue:
                for message in bus.peek(record.StatusQueue, LIMIT):
                    body = json.loads(message.body)
                    if body.get("OrderID") == order_id:
                        statuses.append(body)
                        events.append(
                            {
                                "at": str(body.get("At")),
                                "source": "status",
                                "what": f"status {body.get('Status')} → {record.StatusQueue}",
                                "detail": body.get("Detail") or "",
                            }
                        )
            for message in bus.peek(self.settings.alerts_queue, LIMIT):
                body = json.loads(message.body)
                if body.get("OrderID") == order_id:
                    events.append(
                        {
                            "at": str(body.get("At")),
                            "source": "alert",
                            "what": body.get("Event"),
                            "detail": body.get("Reason"),
                        }
                    )
        events.sort(key=lambda e: str(e["at"]))
        return {
            "lanes": timeline.lanes(
                self.telemetry.spans.get(order_id, []),
                frozenset(e.Action for e in entries),
                timeline.timers(attempt_histories(order_id)),
            ),
            "record": _plain(record),
            "compensation": [_plain(e) for e in entries],
            "statuses": statuses,
            "events": events,
        }


def attempt_histories(order_id: str) -> dict[str, list[dict[str, Any]]]:
    """The Durable history of each of the order's attempts (``<OrderID>-<attempt>``), from
    devhost's task hub; none where no devhost has run with this data directory."""
    database = function_failures.devhost_data_dir(os.environ) / "durable.db"
    try:
        found = replay_history.from_devhost(database, instance_prefix=f"{order_id}-")
    except (replay_history.HistoryError, sqlite3.Error):
        return {}
    prefix = f"{order_id}-"
    return {h.instanceId: h.history for h in found if h.instanceId.removeprefix(prefix).isdigit()}


def _plain(value: Any) -> Any:
    """A record or log entry as JSON values (mappings, tuples, datetimes, enums)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class Dashboard:
    """The page's server: aiohttp on loopback, every store read on one thread of its own."""

    def __init__(self, build: Callable[[], Ports], telemetry_dir: Path | None) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-stores")
        self._build = build
        self._telemetry = TelemetryFiles(telemetry_dir)
        self._picture: Picture | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    def _on_store_thread(self, work: Callable[[Picture], T]) -> T:
        if self._picture is None:
            self._picture = Picture(self._build(), self._telemetry)
        return work(self._picture)

    async def run(self, work: Callable[[Picture], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._on_store_thread, work)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self._page("index.html"))
        app.router.add_get("/order/{order_id}", self._page("order.html"))
        app.router.add_get("/api/summary", self._summary)
        app.router.add_get("/api/order/{order_id}", self._order)
        app.router.add_static("/static/", STATIC)
        return app

    def _page(self, name: str) -> Callable[[web.Request], Any]:
        async def page(_: web.Request) -> web.FileResponse:
            return web.FileResponse(STATIC / name)

        return page

    async def _summary(self, request: web.Request) -> web.Response:
        app = request.query.get("app") or None
        body = await self.run(lambda p: p.summary(app))
        return web.json_response(body, dumps=lambda v: json.dumps(v, default=str))

    async def _order(self, request: web.Request) -> web.Response:
        order_id = request.match_info["order_id"]
        body = await self.run(lambda p: p.order(order_id))
        if body is None:
            return web.json_response({"error": f"no order {order_id!r}"}, status=404)
        return web.json_response(body, dumps=lambda v: json.dumps(v, default=str))

    async def start(self, port: int = 0) -> str:
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, LOOPBACK, port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        return self.url

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

        def close(_: Picture) -> None:
            _.ports.close()

        if self._picture is not None:
            await self.run(close)
        self._executor.shutdown(wait=True)


def telemetry_dir(environ: dict[str, str] | os._Environ[str]) -> Path | None:
    directory = environ.get("SAS_TELEMETRY_DIR")
    return Path(directory) if directory else None


async def serve(build: Callable[[], Ports], port: int, announce: Callable[[str], None]) -> None:
    """Serve until SIGTERM or Ctrl-C: a stack that started it (harness/demo/stack.py) stops it cleanly."""
    dashboard = Dashboard(build, telemetry_dir(os.environ))
    announce(await dashboard.start(port))
    stopped = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stopped.set)
    try:
        await stopped.wait()
    finally:
        await dashboard.stop()


def run_dashboard(port: int, console: Console) -> int:
    """``python -m ops dashboard``: serve until Ctrl-C, with the ports ``python -m ops`` builds."""
    settings = Settings.from_env(os.environ)  # a refused configuration fails before serving

    def build() -> Ports:
        return build_ports(settings, host_clock(), notes=False)  # read-only: no alerts

    def announce(url: str) -> None:
        console.print(f"dashboard: {url}  (read-only, loopback only; Ctrl-C stops it)", highlight=False)

    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(build, port, announce))
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        raise BadArgument(
            f"port {port} on {LOOPBACK} is taken (another dashboard?): stop it, or pass --port N "
            "(0 for any free port)"
        ) from None
    return 0
