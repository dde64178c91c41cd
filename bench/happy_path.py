"""Latency and throughput on the happy path: real processes, no faults.

    .venv/bin/python -m bench.happy_path [--idle 20] [--burst 300]

The embedded stack as ``make demo`` runs it (devhost with function_app.py, two agent processes,
the simulator with no faults and 0-20 ms latency), with the starter at its local default
(every 2 s) so the submission path's own start is what is measured. Each order is posted to the
front end as app-a, and its latency runs from the POST to the ``At`` of its ``completed``
status message (both on this machine's clock). Two phases in one run:

- **idle**: orders one at a time, each posted once the previous one completed;
- **burst**: ``--burst`` orders posted as fast as the front end takes them.

Reports orders/s and latency p50/p90/p99 per phase. Goals (issue 16): idle p50 <= 250 ms;
burst p50 <= 5 s. Per-order store operations and Durable episodes: ``bench.ops_per_order``.
"""

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path

from demo.apps import make_order
from demo.stack import Stack
from domain.apps import principal_header
from services.settings import Settings

PROFILE = {
    "transient_rate": 0,
    "permanent_rate": 0,
    "lost_response_rate": 0,
    "latency_ms": [0, 20],
    "seed": 1,
}


def post(stack: Stack, client_id: str, order_id: str) -> float:
    order = make_order(order_id, "SKU-1")
    request = urllib.request.Request(
        f"{stack.devhost_url}/api/orders",
        data=order.model_dump_json(exclude={"StatusQueue"}).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **principal_header(client_id)},
    )
    sent = time.time()
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 202, response.status
    return sent


def completions(stack: Stack, wanted: set[str], timeout: float) -> dict[str, float]:
    """The ``At`` of each wanted order's completed status, as epoch seconds."""
    done: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    bus = stack.bus()
    try:
        while wanted - done.keys() and time.monotonic() < deadline:
            messages = bus.receive("status-app-a", 64)
            for message in messages:
                status = json.loads(message.body)
                if status["Status"] == "completed" and status["OrderID"] in wanted:
                    done[status["OrderID"]] = datetime.fromisoformat(status["At"]).timestamp()
                bus.complete(message)
            if not messages:
                time.sleep(0.005)
    finally:
        bus.close()
    if wanted - done.keys():
        raise SystemExit(f"{len(wanted - done.keys())} orders did not complete within {timeout:.0f}s")
    return done


def report(phase: str, latencies: list[float], elapsed: float) -> None:
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    print(
        f"{phase:6} {len(latencies):4} orders  {len(latencies) / elapsed:6.1f} orders/s  "
        f"p50 {cuts[49] * 1000:7.0f} ms  p90 {cuts[89] * 1000:7.0f} ms  p99 {cuts[98] * 1000:7.0f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--idle", type=int, default=20)
    parser.add_argument("--burst", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(
            Path(tmp),
            agents=2,
            profile=PROFILE,
            settings={"SAS_STARTER_SCHEDULE": "*/2 * * * * *", "SAS_SUPERVISOR_SCHEDULE": "*/10 * * * * *"},
        ).start()
        try:
            client_id = Settings.from_env(stack.env).submitters.apps[0].client_id
            post(stack, client_id, "warm-up")
            completions(stack, {"warm-up"}, 120)
            idle: list[float] = []
            started = time.time()
            for n in range(args.idle):
                order_id = f"idle-{n}"
                sent = post(stack, client_id, order_id)
                idle.append(completions(stack, {order_id}, 60)[order_id] - sent)
            report("idle", idle, time.time() - started)
            started = time.time()
            sent_at = {f"burst-{n}": post(stack, client_id, f"burst-{n}") for n in range(args.burst)}
            done = completions(stack, set(sent_at), 600)
            report("burst", [done[i] - sent_at[i] for i in sent_at], max(done.values()) - started)
            # The POSTs go one after another, so the burst arrives as fast as the front end
            # answers: a faster front end queues more orders at once, and their latency grows
            # with it. Compare runs at the same arrival rate.
            posting = max(sent_at.values()) - started
            print(f"       posted in {posting:.1f} s ({args.burst / posting:.1f} orders/s)")
        finally:
            stack.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
