"""Orchestrations per second: devhost (SQLite, fsync'd) against Microsoft's in-process
``durabletask.testing`` backend (in memory, over loopback gRPC), in the same run.

    .venv/bin/python -m harness.bench.devhost_throughput [--orchestrations 200]

The workload is the same for both: N instances of a three-activity chain, started through
each engine's own client, timed from the first start to the last completion. durabletask's
client and worker log at WARNING here: at their default, INFO, the client writes two lines per
instance to stderr while it waits, which slowed the peer's side (the ratio read about 0.2 higher
with it, in three alternating runs on the 2-core machine).

``harness.bench.happy_path`` prints this comparison in its own run (``compare`` and ``print_comparison``).
Both write ``harness/bench/results/devhost_throughput.json`` (``record``), which the docs' figures are
rendered from (``python -m harness.tools.bench_figures --write``).
"""

import argparse
import asyncio
import logging
import os
import tempfile
import time
from pathlib import Path

from azure.durable_functions import DurableOrchestrationClient
from durabletask import client as dt_client
from durabletask import task as dt_task
from durabletask import worker as dt_worker
from durabletask.testing import create_test_backend

from harness.bench import results
from harness.bench.agent_idle import children_cpu_seconds, cpu_seconds
from harness.devhost.host import Host
from harness.standins.ports import free_port

APP = Path(__file__).parent / "chain_app"


def _cpu_so_far() -> float:
    """This process (devhost's engine and the client) and devhost's worker processes."""
    return cpu_seconds(os.getpid()) + children_cpu_seconds(os.getpid())


async def run_devhost(count: int) -> tuple[float, float]:
    """Seconds for ``count`` orchestrations, and the cores devhost's processes used meanwhile."""
    with tempfile.TemporaryDirectory() as data:
        # As `devhost start` runs it: no tuning for the benchmark.
        host = Host(APP, data_dir=Path(data), port=0)
        await host.start()
        serving = asyncio.create_task(host.serve())
        client = DurableOrchestrationClient(host.client_json())
        started, cpu = time.perf_counter(), _cpu_so_far()
        ids = [await client.start_new("chain3", f"b-{n}", n) for n in range(count)]
        while (
            host.engine.store.conn.execute(
                "SELECT COUNT(*) FROM instances WHERE status = 'Completed'"
            ).fetchone()[0]
            < count
        ):
            await asyncio.sleep(0.005)
        elapsed = time.perf_counter() - started
        cores = (_cpu_so_far() - cpu) / elapsed
        for n, instance in enumerate(ids):
            status = host.engine.status(instance)
            assert status is not None and status["output"] == n + 3, status
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
        await host.stop()
        return elapsed, cores


def _quiet(name: str) -> logging.Logger:
    logger = logging.getLogger(f"durabletask-{name}")
    logger.setLevel(logging.WARNING)
    return logger


def run_durabletask(count: int) -> float:
    port = free_port()
    backend = create_test_backend(port=port)
    address = f"localhost:{port}"

    def add_one(ctx: dt_task.ActivityContext, value: int) -> int:
        return value + 1

    def chain3(ctx: dt_task.OrchestrationContext, value: int):  # type: ignore[no-untyped-def]
        for _ in range(3):
            value = yield ctx.call_activity(add_one, input=value)
        return value

    worker = dt_worker.TaskHubGrpcWorker(host_address=address, logger=_quiet("worker"))
    worker.add_orchestrator(chain3)
    worker.add_activity(add_one)
    worker.start()
    client = dt_client.TaskHubGrpcClient(host_address=address, logger=_quiet("client"))
    try:
        started = time.perf_counter()
        ids = [client.schedule_new_orchestration(chain3, input=n, instance_id=f"b-{n}") for n in range(count)]
        for n, instance in enumerate(ids):
            state = client.wait_for_orchestration_completion(instance, timeout=120)
            assert state is not None and state.serialized_output == str(n + 3), state
        return time.perf_counter() - started
    finally:
        worker.stop()
        backend.stop()


def compare(count: int) -> tuple[float, float, float]:
    """Seconds for ``count`` orchestrations: durabletask.testing's, then devhost's, and the cores
    devhost used."""
    peer = run_durabletask(count)
    ours, cores = asyncio.run(run_devhost(count))
    return peer, ours, cores


def limit_hit(cores: float) -> str:
    machine = os.cpu_count() or 1
    if cores >= 0.9 * machine:
        return f"CPU: the machine's {machine} cores"
    return f"not CPU: devhost's processes used {cores:.2f} of {machine} cores"


def record(count: int, peer: float, ours: float, cores: float) -> None:
    results.write(
        "devhost_throughput",
        settings={"orchestrations": count, "workload": "three-activity chain (harness/bench/chain_app)"},
        limit=limit_hit(cores),
        figures={
            "devhost_per_second": round(count / ours, 1),
            "durabletask_per_second": round(count / peer, 1),
            "ratio": round(peer / ours, 2),
            "devhost_cores": round(cores, 2),
        },
    )


def print_comparison(count: int, peer: float, ours: float) -> None:
    print(f"{'engine':40} {'seconds':>8} {'orch/s':>8}")
    print(f"{'durabletask.testing (in memory)':40} {peer:8.2f} {count / peer:8.1f}")
    print(f"{'devhost (SQLite WAL, real worker)':40} {ours:8.2f} {count / ours:8.1f}")
    print(f"devhost / durabletask throughput ratio: {peer / ours:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orchestrations", type=int, default=200)
    count = parser.parse_args().orchestrations
    peer, ours, cores = compare(count)
    print_comparison(count, peer, ours)
    record(count, peer, ours, cores)


if __name__ == "__main__":
    main()
