"""What message time-to-live costs the local bus: SQLite VM steps per message, with and without a TTL.

    .venv/bin/python -m harness.bench.local_bus_expiry [--messages 200] [--backlog 0 5000] [--json]

Two queues in one bus file, the same run: ``plain`` (no DefaultMessageTimeToLive, as before TTL)
and ``expiring`` (PT1H, dead-lettering on expiry, as Config.json declares every queue). For each,
``--messages`` messages are sent, received one at a time and completed, beside a backlog of
scheduled messages (not yet due, so never received) that a receive must not scan: each receive
runs the expiry sweep, which reads the expiry index, not the queue. The figure is SQLite's own
count of bytecode instructions (a progress handler every step) per message, send to complete,
the difference and the ratio expiring / plain; wall time is not measured (a 2-core machine
shared with others). The backlog's own cost (today's receive walks the queue's scheduled
messages in sequence order) is the same for both, so the difference is what TTL adds.
"""

import argparse
import sqlite3
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from adapters.clock import ManualClock
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import QueueConfig
from harness.bench import results as results_file

QUEUES = (
    QueueConfig("plain", duplicate_detection_window=None),
    QueueConfig(
        "expiring",
        duplicate_detection_window=None,
        default_message_ttl=timedelta(hours=1),
        dead_letter_on_expiration=True,
    ),
)


def counted(conn: sqlite3.Connection, work: Callable[[], None]) -> int:
    steps = 0

    def tick() -> int:
        nonlocal steps
        steps += 1
        return 0  # 0: go on

    conn.set_progress_handler(tick, 1)
    try:
        work()
    finally:
        conn.set_progress_handler(None, 1)
    return steps


def steps_per_message(queue: str, messages: int, backlog: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
        with LocalServiceBus(Path(tmp) / "bus.db", QUEUES, clock=clock.now) as bus:
            later = clock.now() + timedelta(minutes=30)
            for n in range(backlog):
                bus.send(queue, b"x", message_id=f"backlog-{n}", scheduled_enqueue_time=later)

            def run() -> None:
                for n in range(messages):
                    bus.send(queue, b"x", message_id=f"m-{n}")
                    [message] = bus.receive(queue)
                    bus.complete(message)

            return counted(bus._connection(), run) / messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--backlog", type=int, nargs="+", default=[0, 5000])
    parser.add_argument(
        "--json", action="store_true", help="write harness/bench/results/local_bus_expiry.json"
    )
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
    for backlog in args.backlog:
        plain = steps_per_message("plain", args.messages, backlog)
        expiring = steps_per_message("expiring", args.messages, backlog)
        figures[f"backlog_{backlog}"] = {
            "plain_steps": round(plain, 1),
            "expiring_steps": round(expiring, 1),
            "extra_steps": round(expiring - plain, 1),
            "ratio": round(expiring / plain, 2),
        }
        extra = expiring - plain
        print(f"backlog {backlog:>6}: plain {plain:.1f}, expiring {expiring:.1f} (+{extra:.1f}) steps")
    if args.json:
        results_file.write(
            "local_bus_expiry",
            settings={"messages": args.messages, "backlog": args.backlog},
            limit="none: a count of SQLite VM steps, not a rate",
            figures=figures,
        )


if __name__ == "__main__":
    main()
