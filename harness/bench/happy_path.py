"""The happy-path benchmark: latency, throughput, where the time goes, and the cost per order.

    .venv/bin/python -m harness.bench.happy_path [--idle 20] [--burst 300] [--concurrency 32]
        [--skip-latency] [--skip-ops] [--skip-ratio] [--ops-orders 50] [--orchestrations 200]
        [--set NAME=VALUE ...] [--workdir DIR]

One run, three parts, each of which can be skipped (and run alone: ``harness.bench.ops_per_order``,
``harness.bench.devhost_throughput``):

1. **Latency** on the embedded stack as ``make demo`` runs it: devhost with function_app.py, two
   agent processes, the simulator with no faults and 0-20 ms latency; the starter at its local
   default (every 2 s), so the submission path's own start is what is measured; the embedded
   profile's step window and start grace (30 s, 60 s), not the demo's 4 s, which a step waiting
   its turn in a burst outlives (its attempt is then retried, off the happy path). Orders are
   posted to the front end as app-a; an order's latency runs from its POST being sent to its
   ``completed`` status message being received by this client (both on this machine's clock).

   - **idle**: orders one at a time, each posted once the previous one completed;
   - **burst**: ``--burst`` orders posted concurrently, ``--concurrency`` POSTs at a time.

   For each phase: orders/s, latency p50/p90/p99, and the latency split into stages, from the
   spans the app exports (SAS_TELEMETRY_DIR, JSON lines: ``submission``, ``claim``,
   ``activity.advance``, ``agent.reply`` from devhost's worker, ``agent.request`` from the
   agents) and the client's own timestamps. The stages are contiguous, so they add up to the
   latency; the table names the span boundaries of each.
2. **Cost per order**: store operations, messages, Durable episodes, activities and history
   events per order, happy, compensated and recovered (``harness.bench.ops_per_order``: through the front
   end, the app in a worker process, devhost's real clock).
3. **devhost / durabletask.testing** orchestrations/s (``harness.bench.devhost_throughput``).

Goals (issue 16), on the 2-core machine: idle p50 <= 250 ms; burst of 300 at >= 11 orders/s
(twice the 5.5 measured before) with p50 <= 5 s; devhost / durabletask ratio >= 1.5.
"""

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import aiohttp

from adapters.servicebus.local_bus import LocalServiceBus
from domain.sample_workflow import WORKFLOWS
from domain.workflow import Runs
from harness.bench import devhost_throughput, ops_per_order, results
from harness.bench.agent_idle import children_cpu_seconds, cpu_seconds
from harness.demo.apps import make_order
from harness.demo.stack import ROOT, Stack
from harness.devhost.config import DevhostConfig
from harness.devhost.worker_processes import process_count
from settings import Settings

PROFILE = {
    "transient_rate": 0,
    "permanent_rate": 0,
    "lost_response_rate": 0,
    "latency_ms": [0, 20],
    "seed": 1,
}
EMBEDDED: dict[str, str] = json.loads((ROOT / "local.settings.embedded.json").read_text())["Values"]
SETTINGS = {
    "SAS_STARTER_SCHEDULE": "*/2 * * * * *",
    "SAS_SUPERVISOR_SCHEDULE": "*/10 * * * * *",
    # The embedded profile's step window and start grace, not the demo's 4 s (harness.demo.stack.FAST, for
    # faults that resolve in seconds): in a burst, a step can wait longer than 4 s for its turn,
    # and its attempt would time out and be retried: not the happy path.
    **{name: EMBEDDED[name] for name in ("SAS_STEP_TIMEOUT_SECONDS", "SAS_START_GRACE_SECONDS")},
    # The span exporters' queue (2048 by default) drops spans when full: room for a whole burst.
    "OTEL_BSP_MAX_QUEUE_SIZE": "65536",
}
STATUS_QUEUE = "status-app-a"
STARTED = time.monotonic()


def progress(text: str) -> None:
    load = os.getloadavg()[0]
    print(f"[{time.monotonic() - STARTED:6.1f} s, load {load:4.1f}] {text}", flush=True)


# --- the client: POSTs and status messages ----------------------------------------------------


@dataclass
class Timing:
    """What the client saw of one order (epoch seconds)."""

    sent: float  # POST sent
    answered: float  # 202 received
    received: float = 0.0  # `completed` received
    at: float = 0.0  # the `completed` message's At: the clock read just before the final write


async def post_orders(url: str, token: str, order_ids: list[str], concurrency: int) -> dict[str, Timing]:
    """POST each order as the app ``token`` is for, at most ``concurrency`` at a time; every one
    must be accepted (202)."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    limit = asyncio.Semaphore(concurrency)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency), timeout=timeout
    ) as session:

        async def post(order_id: str) -> tuple[str, Timing]:
            body = make_order(order_id, "SKU-1").model_dump_json(exclude={"StatusQueue"})
            async with limit:
                sent = time.time()
                async with session.post(url, data=body, headers=headers) as response:
                    text = await response.text()
                    if response.status != 202:
                        raise RuntimeError(f"POST {order_id}: {response.status} {text}")
                return order_id, Timing(sent, time.time())

        return dict(await asyncio.gather(*(post(i) for i in order_ids)))


class StatusReceiver:
    """Receives the status queue on a thread of its own from start to stop, noting when each
    order's ``completed`` arrives, so that nothing waits in the queue for the client to look.
    Between receives it waits for a commit to the bus, looking every 5 ms."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._done: dict[str, tuple[float, float]] = {}  # order -> (received, At)
        self._failed: dict[str, str] = {}
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status-receiver", daemon=True)

    def __enter__(self) -> "StatusReceiver":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        bus = LocalServiceBus(self._path)
        try:
            while not self._stopping.is_set():
                marker = bus.commit_marker()
                messages = bus.receive(STATUS_QUEUE, 256)
                received = time.time()
                with self._changed:
                    for message in messages:
                        status = json.loads(message.body)
                        order_id, state = status["OrderID"], status["Status"]
                        if state == "completed":
                            at = datetime.fromisoformat(status["At"]).timestamp()
                            self._done[order_id] = (received, at)
                        elif state != "received":
                            self._failed[order_id] = f"{state}: {status.get('Detail')}"
                    self._changed.notify_all()
                for message in messages:
                    bus.complete(message)
                if not messages:
                    bus.wait_for_commit(marker, 0.5, interval=0.005)
        except BaseException as error:
            with self._changed:
                self._error = error
                self._changed.notify_all()
            raise
        finally:
            bus.close()

    def wait(
        self, timings: dict[str, Timing], timeout: float, report: Callable[[int], None] | None = None
    ) -> None:
        """Until every order in ``timings`` completed; fills in when each was received."""
        deadline = time.monotonic() + timeout
        next_report = time.monotonic() + 5
        with self._changed:
            while True:
                if self._error is not None:
                    raise RuntimeError("the status receiver failed") from self._error
                if failed := {i: self._failed[i] for i in timings if i in self._failed}:
                    raise SystemExit(f"{len(failed)} orders did not complete: {failed}")
                done = sum(i in self._done for i in timings)
                if done == len(timings):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"{len(timings) - done} orders did not complete within {timeout:.0f}s")
                if report is not None and time.monotonic() >= next_report:
                    report(done)
                    next_report += 5
                self._changed.wait(0.5)
            for order_id, timing in timings.items():
                timing.received, timing.at = self._done[order_id]


# --- the spans ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    name: str
    start: float  # epoch seconds
    end: float
    step: str | None


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def read_spans(folder: Path, order_ids: Collection[str]) -> tuple[dict[str, list[Span]], int]:
    """Every exported span of these orders, by order and by start time; and how many lines could
    not be read (the two agents append to one file, so a line can come out torn)."""
    wanted = set(order_ids)
    spans: dict[str, list[Span]] = {i: [] for i in wanted}
    torn = 0
    for path in sorted(folder.glob("*.spans.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                order_id = row["attributes"].get("sas.order_id")
                if order_id in wanted:
                    step = row["attributes"].get("step")
                    spans[order_id].append(
                        Span(row["name"], _epoch(row["start_time"]), _epoch(row["end_time"]), step)
                    )
            except (ValueError, KeyError, TypeError):
                torn += 1
    for found in spans.values():
        found.sort(key=lambda s: s.start)
    return spans, torn


@dataclass(frozen=True)
class OrderSpans:
    """The spans of one attempt on the happy path, in order."""

    submission: Span
    claim: Span
    advances: list[Span]  # one per wait, plus the one that finishes
    replies: list[Span]  # agent.reply, one per agent step
    requests: list[Span] | None  # agent.request (the agents' process), when all were readable

    @classmethod
    def of(cls, spans: list[Span], agent_steps: int) -> "OrderSpans | None":
        """None until every span the app makes for the order has been exported."""

        def named(name: str) -> list[Span]:
            return [s for s in spans if s.name == name]

        submission, claim = named("submission"), named("claim")
        advances, replies = named("activity.advance"), named("agent.reply")
        requests = named("agent.request")
        if not submission or not claim or len(advances) != agent_steps + 1 or len(replies) != agent_steps:
            return None
        steps = [r.step for r in replies]
        matched = len(requests) == agent_steps and [r.step for r in requests] == steps
        return cls(submission[0], claim[0], advances, replies, requests if matched else None)


def wait_for_spans(
    folder: Path, timings: dict[str, Timing], agent_steps: int, timeout: float = 20
) -> tuple[dict[str, OrderSpans], dict[str, list[Span]], int]:
    """The spans of every order, once exported (each process's exporter writes every 5 s): those
    complete, all of them, and the count of unreadable lines."""
    deadline = time.monotonic() + timeout
    while True:
        spans, torn = read_spans(folder, timings)
        complete = {i: o for i, s in spans.items() if (o := OrderSpans.of(s, agent_steps)) is not None}
        with_agents = sum(o.requests is not None for o in complete.values())
        if with_agents == len(timings) or time.monotonic() > deadline:
            return complete, spans, torn
        time.sleep(1)


# --- the stages --------------------------------------------------------------------------------

# (stage, where its boundaries come from); indented stages split the one above them.
STAGES = (
    ("front end", "client: POST sent -> 202 received"),
    ("queue", "202 received -> `submission` start"),
    ("submission", "`submission` span"),
    ("pending wait", "`submission` end -> `claim` start (the claim's write; a starter tick if missed)"),
    ("orchestration", "`claim` start -> last `activity.advance` end, less the agent round trips"),
    ("  activities", "the `activity.advance` spans"),
    ("  Durable, host", "the rest: start_new (`claim` span), dispatch, episodes replaying history"),
    ("agent round trips", "`activity.advance` end (sends the request last) -> `agent.reply` end"),
    ("  request hop", "advance end -> `agent.request` start (agent process)"),
    ("  agent", "`agent.request` span (calls to the simulator)"),
    ("  reply hop", "`agent.request` end -> `agent.reply` start"),
    ("  raise event", "`agent.reply` span (raise_event to the Durable API)"),
    ("status", "last `activity.advance` end -> client received `completed`"),
    ("latency", "POST sent -> `completed` received"),
)


def stages(timing: Timing, spans: OrderSpans) -> dict[str, float]:
    """Seconds per stage for one order (the agent split only when its spans could be read)."""
    waits = spans.advances[:-1]
    trips = [r.end - a.end for a, r in zip(waits, spans.replies, strict=True)]
    finished = spans.advances[-1].end
    orchestration = finished - spans.claim.start - sum(trips)
    activities = sum(a.end - a.start for a in spans.advances)
    out = {
        "front end": timing.answered - timing.sent,
        "queue": spans.submission.start - timing.answered,
        "submission": spans.submission.end - spans.submission.start,
        "pending wait": spans.claim.start - spans.submission.end,
        "orchestration": orchestration,
        "  activities": activities,
        "  Durable, host": orchestration - activities,
        "agent round trips": sum(trips),
        "status": timing.received - finished,
        "latency": timing.received - timing.sent,
    }
    if spans.requests is not None:
        out |= {
            "  request hop": sum(q.start - a.end for a, q in zip(waits, spans.requests, strict=True)),
            "  agent": sum(q.end - q.start for q in spans.requests),
            "  reply hop": sum(r.start - q.end for q, r in zip(spans.requests, spans.replies, strict=True)),
            "  raise event": sum(r.end - r.start for r in spans.replies),
        }
    return out


def _cut(values: list[float], percent: int) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


def report_latency(phase: str, timings: dict[str, Timing], started: float) -> dict[str, float]:
    """Prints the phase's throughput and latency, and returns them for the results file."""
    latencies = [t.received - t.sent for t in timings.values()]
    elapsed = max(t.received for t in timings.values()) - started
    figures = {
        "orders": len(latencies),
        "orders_per_second": round(len(latencies) / elapsed, 1),
        **{f"p{cut}_ms": round(_cut(latencies, cut) * 1000) for cut in (50, 90, 99)},
    }
    print(
        f"{phase:6} {len(latencies):4} orders  {len(latencies) / elapsed:6.1f} orders/s  "
        f"p50 {_cut(latencies, 50) * 1000:7.0f} ms  p90 {_cut(latencies, 90) * 1000:7.0f} ms  "
        f"p99 {_cut(latencies, 99) * 1000:7.0f} ms",
        flush=True,
    )
    return figures


def report_stages(phase: str, timings: dict[str, Timing], folder: Path, agent_steps: int) -> None:
    progress(f"{phase}: reading spans")
    spans, every, torn = wait_for_spans(folder, timings, agent_steps)
    rows = [stages(timings[i], s) for i, s in spans.items()]
    left_out = sorted(set(timings) - set(spans))
    retried = [i for i in left_out if sum(s.name == "claim" for s in every[i]) > 1]
    print(
        f"\n{phase}: where the time goes, over the {len(rows)} orders on the happy path whose spans were"
        " all exported"
        + (
            f" ({len(retried)} took another attempt, {len(left_out) - len(retried)} lack spans)"
            if left_out
            else ""
        )
        + (f"; {torn} unreadable span lines" if torn else "")
    )
    if left_out:
        found = Counter(s.name for s in every[left_out[0]])
        print(f"  e.g. {left_out[0]}, whose spans were: {dict(sorted(found.items()))}")
    if not rows:
        return
    total = statistics.fmean(r["latency"] for r in rows)
    print(f"  {'stage':19} {'mean ms':>8} {'share':>6} {'p50 ms':>8} {'p90 ms':>8}  from")
    for stage, source in STAGES:
        values = [r[stage] for r in rows if stage in r]
        if not values:
            print(f"  {stage:19} {'n/a':>8} {'':6} {'':8} {'':8}  {source} (agent spans unreadable)")
            continue
        mean = statistics.fmean(values)
        partial = f"  [{len(values)} orders]" if len(values) != len(rows) else ""
        print(
            f"  {stage:19} {mean * 1000:8.1f} {mean / total:6.0%} {_cut(values, 50) * 1000:8.1f} "
            f"{_cut(values, 90) * 1000:8.1f}  {source}{partial}"
        )
    final_write = statistics.fmean(timings[i].received - timings[i].at for i in spans)
    print(
        "  Not exact: a request's send and the final write have no span of their own; both are"
        " the last acts of an `activity.advance`, counted in activities.\n"
        f"  Status from the final write instead (the `completed` message's At, read just before"
        f" it): mean {final_write * 1000:.1f} ms.",
        flush=True,
    )


def cpu_now(stack: Stack) -> dict[str, float]:
    """CPU seconds (user + system, every thread) of each process of the stack and of this one;
    devhost's worker processes (its children) together, as "workers"."""
    return {
        **{name: cpu_seconds(p.pid) for name, p in stack.processes.items()},
        "workers": children_cpu_seconds(stack.processes["devhost"].pid),
        "this client": sum(os.times()[:2]),
    }


def limit_hit(used: dict[str, float], elapsed: float, workers: int) -> str:
    """Which limit a burst ran into, from the cores each process used over it."""
    cores = {name: cpu / elapsed for name, cpu in used.items()}
    machine = os.cpu_count() or 1
    if cores.get("devhost", 0) >= 0.9:
        return "CPU: devhost's own process at its ceiling (one core)"
    if cores.get("workers", 0) >= 0.9 * workers:
        return f"CPU: the {workers} worker process(es) at their ceiling"
    if sum(cores.values()) >= 0.9 * machine:
        return f"CPU: the machine's {machine} cores"
    return "not CPU: the claim rate, the in-flight cap or the agents (see the stages below)"


def report_cpu(
    phase: str,
    before: dict[str, float],
    after: dict[str, float],
    elapsed: float,
    orders: int,
    *,
    workers: int,
) -> dict[str, object]:
    """Prints each process's CPU over the phase; returns the limit hit and the cores used."""
    print(f"  CPU over the {phase} phase ({elapsed:.1f} s, /proc/<pid>/stat):")
    print(f"    {'process':12} {'cpu s':>7} {'cores':>6} {'ms/order':>9}")
    used = {name: cpu - before[name] for name, cpu in after.items()}
    for name, cpu in used.items():
        print(f"    {name:12} {cpu:7.2f} {cpu / elapsed:6.2f} {cpu / orders * 1000:9.1f}")
    limit = limit_hit(used, elapsed, workers)
    print(f"  limit hit: {limit}", flush=True)
    return {"limit": limit, "cores": {name: round(cpu / elapsed, 2) for name, cpu in used.items()}}


# --- the phases --------------------------------------------------------------------------------


def latency(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.workdir or tmp)
        progress(f"starting the stack: simulator, devhost, 2 agents (in {workdir})")
        stack = Stack(workdir, agents=2, profile=PROFILE, settings=SETTINGS | dict(args.set)).start()
        try:
            settings = Settings.from_env(stack.env)
            env = stack.env
            per_function = DevhostConfig.from_env(ROOT, env).concurrency
            workers = process_count(env)
            print(
                f"  in flight at most {settings.max_in_flight}; the starter ({env['SAS_STARTER_SCHEDULE']})"
                f" claims up to {settings.claim_batch_size} a tick; devhost runs {per_function} messages"
                f" per function at a time in {workers} worker process(es); step window"
                f" {env['SAS_STEP_TIMEOUT_SECONDS']} s",
                flush=True,
            )
            token = stack.token_source(settings.submitters.apps[0].name)
            workflow = WORKFLOWS[settings.workflow_version]
            agent_steps = sum(s.runs is Runs.AGENT for s in workflow.steps)
            folder = Path(stack.env["SAS_TELEMETRY_DIR"])
            url = f"{stack.devhost_url}/api/orders"
            with StatusReceiver(stack.workdir / "servicebus.db") as receiver:
                receiver.wait(asyncio.run(post_orders(url, token(), ["warm-up"], 1)), 120)
                progress(f"idle: {args.idle} orders, one at a time")
                idle: dict[str, Timing] = {}
                cpu, started = cpu_now(stack), time.time()
                for n in range(args.idle):
                    posted = asyncio.run(post_orders(url, token(), [f"idle-{n}"], 1))
                    receiver.wait(posted, 60)
                    idle |= posted
                figures = {"idle": report_latency("idle", idle, started)}
                figures["idle"] |= report_cpu(
                    "idle", cpu, cpu_now(stack), time.time() - started, args.idle, workers=workers
                )

                progress(f"burst: {args.burst} orders, {args.concurrency} POSTs at a time")
                ids = [f"burst-{n}" for n in range(args.burst)]
                cpu, started = cpu_now(stack), time.time()
                burst = asyncio.run(post_orders(url, token(), ids, args.concurrency))
                posting = max(t.answered for t in burst.values()) - started
                progress(f"burst: posted in {posting:.2f} s ({args.burst / posting:.0f} orders/s)")
                receiver.wait(burst, 600, lambda done: progress(f"burst: {done}/{args.burst} completed"))
                figures["burst"] = report_latency("burst", burst, started)
                print(f"       posted in {posting:.2f} s ({args.burst / posting:.0f} orders/s)", flush=True)
                figures["burst"] |= report_cpu(
                    "burst", cpu, cpu_now(stack), time.time() - started, args.burst, workers=workers
                )
            results.write(
                "happy_path",
                settings={
                    "idle": args.idle,
                    "burst": args.burst,
                    "concurrency": args.concurrency,
                    "max_in_flight": settings.max_in_flight,
                    "per_function": per_function,
                    "worker_processes": workers,
                    "set": dict(args.set),
                },
                limit=str(figures["burst"]["limit"]),
                figures=figures,
            )
            report_stages("idle", idle, folder, agent_steps)
            report_stages("burst", burst, folder, agent_steps)
        finally:
            progress("stopping the stack")
            stack.stop()


def _setting(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    if not name or not _:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=int, default=20, help="orders one at a time (default 20)")
    parser.add_argument("--burst", type=int, default=300, help="orders posted at once (default 300)")
    parser.add_argument("--concurrency", type=int, default=32, help="POSTs in flight in the burst")
    parser.add_argument(
        "--set", type=_setting, action="append", default=[], metavar="NAME=VALUE", help="an app setting"
    )
    parser.add_argument(
        "--workdir", help="the stack's files (logs, spans, stores) here, kept; default: a temp dir"
    )
    parser.add_argument("--skip-latency", action="store_true", help="no stack: skip idle and burst")
    parser.add_argument("--skip-ops", action="store_true", help="skip the cost per order")
    parser.add_argument("--ops-orders", type=int, default=50)
    parser.add_argument("--skip-ratio", action="store_true", help="skip devhost / durabletask")
    parser.add_argument("--orchestrations", type=int, default=200, help="for the ratio")
    args = parser.parse_args()
    if not args.skip_latency:
        latency(args)
    if not args.skip_ops:
        progress(f"cost per order: {args.ops_orders} orders per scenario through the front end")
        print(ops_per_order.render_table(ops_per_order.measure(args.ops_orders)))
    if not args.skip_ratio:
        progress(f"devhost / durabletask.testing: {args.orchestrations} three-activity chains each")
        peer, ours, cores = devhost_throughput.compare(args.orchestrations)
        devhost_throughput.print_comparison(args.orchestrations, peer, ours)
        devhost_throughput.record(args.orchestrations, peer, ours, cores)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
