"""The same workload on devhost's two paths, in one run: the app imported into devhost's own
process (``devhost start --in-process``, the baseline) and the deployment package in worker
processes over gRPC (the default, as Azure runs it), with 1 and 2 of them.

    .venv/bin/python -m harness.bench.worker_paths [--idle 20] [--burst 300] [--concurrency 32]
        [--paths in-process,1,2] [--set NAME=VALUE ...] [--json]

Each path gets a fresh embedded stack (``harness.demo.stack``: simulator with no faults, two agents),
a warm-up order, ``--idle`` orders one at a time, then a burst of ``--burst``. It prints, per
path: idle p50, burst orders/s and p50, CPU ms per order of devhost's own process and of its
worker processes (from ``/proc``), and the ratios against the in-process baseline of the same
run, and each path's CPU ceiling: the orders a second its CPU per order would allow on the
machine's cores with nothing else running (``Result.cpu_ceiling``), which a loaded machine's
rates cannot show. It names the limit each burst hit: a process at its CPU ceiling (>= 0.9 of a core), the
machine's cores, or neither (then the wait is elsewhere: the claim rate, the in-flight cap, the
agents). Settings are the embedded profile's, as ``harness.bench.happy_path`` runs them. ``--json``
writes ``harness/bench/results/worker_paths.json`` (the settings, the machine's load at each path's start,
every figure and ratio), which ``docs/capacity.md`` reads.
"""

import argparse
import asyncio
import dataclasses
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.bench import results as bench_results
from harness.bench.agent_idle import children_cpu_seconds, cpu_seconds
from harness.bench.happy_path import (
    PROFILE,
    SETTINGS,
    StatusReceiver,
    Timing,
    _setting,
    post_orders,
    progress,
)
from harness.demo.stack import Stack
from settings import Settings

CORES = os.cpu_count() or 1


def cpu(stack: Stack) -> tuple[float, float]:
    """CPU seconds of devhost's own process and of its worker processes so far."""
    host = stack.processes["devhost"].pid
    return cpu_seconds(host), children_cpu_seconds(host)


@dataclass
class Result:
    path: str
    idle_p50: float
    burst_rate: float
    burst_p50: float
    host_ms: float  # CPU ms per order, devhost's process, burst
    worker_ms: float  # CPU ms per order, its worker processes, burst
    host_cores: float  # cores used over the burst
    worker_cores: float
    load_1min: float  # the machine's load at the path's start: other work shares the cores

    def cpu_ceiling(self) -> float:
        """Orders a second this path's CPU per order allows on the machine's cores with nothing
        else running: each process is one core at most (the GIL), the worker processes share
        the order's worker CPU, and all of them together share the cores."""
        ceilings = [1000 / self.host_ms, CORES * 1000 / (self.host_ms + self.worker_ms)]
        if self.path != "in-process":
            ceilings.append(int(self.path) * 1000 / self.worker_ms)
        return min(ceilings)

    def limit(self) -> str:
        if self.host_cores >= 0.9:
            return "devhost's process at its CPU ceiling"
        if self.host_cores + self.worker_cores >= 0.9 * CORES:
            return f"the machine's {CORES} cores"
        if self.load_1min >= CORES:
            # Other work on the machine holds the cores these processes did not get.
            return (
                f"the {CORES} cores, shared with other work (load {self.load_1min} at the start):"
                f" this path's processes got {self.host_cores + self.worker_cores:.2f} of them"
            )
        return "not CPU: the claim rate, the in-flight cap or the agents"


def _p50(timings: dict[str, Timing]) -> float:
    return statistics.median(t.received - t.sent for t in timings.values())


def run_path(path: str, args: argparse.Namespace) -> Result:
    settings = SETTINGS | dict(args.set)
    flags: tuple[str, ...] = ()
    load = bench_results.machine()["load_1min"]
    if path == "in-process":
        flags = ("--in-process",)
    else:
        settings |= {"FUNCTIONS_WORKER_PROCESS_COUNT": path}
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(Path(tmp), agents=2, profile=PROFILE, settings=settings, devhost_flags=flags).start()
        try:
            token = stack.token_source(Settings.from_env(stack.env).submitters.apps[0].name)
            url = f"{stack.devhost_url}/api/orders"
            with StatusReceiver(stack.workdir / "servicebus.db") as receiver:
                receiver.wait(asyncio.run(post_orders(url, token(), ["warm-up"], 1)), 120)
                idle: dict[str, Timing] = {}
                for n in range(args.idle):
                    posted = asyncio.run(post_orders(url, token(), [f"idle-{n}"], 1))
                    receiver.wait(posted, 60)
                    idle |= posted
                progress(f"{path}: idle p50 {_p50(idle) * 1000:.0f} ms; burst of {args.burst}")
                ids = [f"burst-{n}" for n in range(args.burst)]
                (host_before, workers_before), started = cpu(stack), time.time()
                burst = asyncio.run(post_orders(url, token(), ids, args.concurrency))
                receiver.wait(burst, 900, lambda done: progress(f"{path}: {done}/{args.burst} completed"))
                elapsed = max(t.received for t in burst.values()) - started
                host_after, workers_after = cpu(stack)
        finally:
            stack.stop()
    host, workers = host_after - host_before, workers_after - workers_before
    return Result(
        path=path,
        idle_p50=_p50(idle),
        burst_rate=args.burst / elapsed,
        burst_p50=_p50(burst),
        host_ms=host / args.burst * 1000,
        worker_ms=workers / args.burst * 1000,
        host_cores=host / elapsed,
        worker_cores=workers / elapsed,
        load_1min=load,
    )


def _baseline(results: list[Result]) -> Result:
    return next((r for r in results if r.path == "in-process"), results[0])


def record(results: list[Result], settings: dict[str, str]) -> None:
    """``harness/bench/results/worker_paths.json``: each path's figures and its ratios to the baseline."""
    base = _baseline(results)
    paths = {
        r.path: {k: round(v, 3) if isinstance(v, float) else v for k, v in dataclasses.asdict(r).items()}
        | {
            "limit": r.limit(),
            "rate_ratio": round(r.burst_rate / base.burst_rate, 2),
            "p50_ratio": round(r.burst_p50 / base.burst_p50, 2),
            "cpu_ceiling": round(r.cpu_ceiling(), 1),
            "cpu_ceiling_ratio": round(r.cpu_ceiling() / base.cpu_ceiling(), 2),
        }
        for r in results
    }
    limits = "; ".join(f"{r.path}: {r.limit()}" for r in results)
    bench_results.write(
        "worker_paths", settings=settings, limit=limits, figures={"baseline": base.path, "paths": paths}
    )


def report(results: list[Result]) -> None:
    base = _baseline(results)
    print(f"\n{CORES} cores. Burst: ratios against '{base.path}' of this run.")
    print(
        f"{'path':12} {'idle p50':>9} {'orders/s':>9} {'x':>5} {'burst p50':>10} {'x':>5}"
        f" {'host ms/o':>10} {'workers ms/o':>13} {'cores h+w':>10} {'cpu ceil':>9} {'x':>5}  limit"
    )
    for r in results:
        rate, p50 = r.burst_rate / base.burst_rate, r.burst_p50 / base.burst_p50
        print(
            f"{r.path:12} {r.idle_p50 * 1000:7.0f}ms {r.burst_rate:9.1f} {rate:5.2f}"
            f" {r.burst_p50:9.2f}s {p50:5.2f} {r.host_ms:10.1f} {r.worker_ms:13.1f}"
            f" {r.host_cores:4.2f}+{r.worker_cores:4.2f} {r.cpu_ceiling():9.1f}"
            f" {r.cpu_ceiling() / base.cpu_ceiling():5.2f}  {r.limit()}",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=int, default=20)
    parser.add_argument("--burst", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--paths", default="in-process,1,2", help="in-process and/or worker process counts")
    parser.add_argument("--set", type=_setting, action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--json", action="store_true", help="write harness/bench/results/worker_paths.json")
    args = parser.parse_args()
    results = []
    for path in args.paths.split(","):
        progress(f"{path}: starting the stack")
        results.append(run_path(path, args))
    report(results)
    if args.json:
        record(results, SETTINGS | dict(args.set) | {"burst": str(args.burst), "idle": str(args.idle)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
