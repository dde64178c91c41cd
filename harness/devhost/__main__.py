"""``python -m harness.devhost``: start the host, or look at orchestration instances.

python -m harness.devhost start [--app-dir DIR] [--data-dir DIR] [--port N] [--in-process]
python -m harness.devhost instances [--status Running,Failed] [--app-dir DIR] [--data-dir DIR]
python -m harness.devhost show INSTANCE_ID [--app-dir DIR] [--data-dir DIR]
"""

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from pathlib import Path

from harness.devhost.clock import SystemClock
from harness.devhost.config import DevhostConfig
from harness.devhost.durable_engine import DurableEngine
from harness.devhost.durable_store import DurableStore
from harness.devhost.host import Host, HostError
from harness.devhost.indexing import IndexingError
from harness.devhost.settings import SETTINGS_FILE_VARIABLE, SettingsError, load_local_settings
from harness.devhost.worker_processes import process_count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.devhost", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("start", "run the function app until Ctrl-C or SIGTERM"),
        ("instances", "list orchestration instances"),
        ("show", "show one instance with its history"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("--app-dir", type=Path, default=Path.cwd())
        command.add_argument("--data-dir", type=Path, default=None)
        if name == "start":
            command.add_argument("--port", type=int, default=None)
            command.add_argument(
                "--in-process",
                action="store_true",
                help="import the app into devhost's own process instead of running the deployment "
                "package in worker processes (a baseline for benchmarks; not how Azure runs it)",
            )
        if name == "instances":
            command.add_argument("--status", default="", help="comma-separated runtime statuses")
        if name == "show":
            command.add_argument("instance_id")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(name)s: %(message)s")
    # The Azure SDKs log every HTTP request and AMQP state change at INFO: that is their debug.
    logging.getLogger("azure").setLevel(logging.WARNING)
    try:
        if args.command == "start":
            return asyncio.run(_start(args.app_dir, args.data_dir, args.port, in_process=args.in_process))
        return _inspect(args)
    except (HostError, IndexingError, SettingsError) as error:
        print(f"devhost: {error}", file=sys.stderr)
        return 2


async def _start(app_dir: Path, data_dir: Path | None, port: int | None, *, in_process: bool) -> int:
    host = Host(app_dir, data_dir=data_dir, port=port, in_process=in_process)
    try:
        await host.start()
    except BaseException:
        # A refused app (an entity function, an unknown binding) is refused after its worker
        # processes and gRPC server started: stop them on this loop, or their finalizers run
        # after asyncio.run closed it ("Event loop is closed").
        await host.stop()
        raise
    print("\nFunctions:\n")
    for spec in host.functions:
        print(f"        {spec.describe()}")
    workers = (
        "in devhost's process" if host.in_process else f"in {process_count(host.env)} worker process(es)"
    )
    print(
        f"\nHost started: {host.base_url} (the app runs {workers}; data in {host.config.data_dir})",
        flush=True,
    )
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopping.set)
    serving = asyncio.create_task(host.serve())
    await stopping.wait()
    print("devhost: stopping", flush=True)
    serving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    await host.stop()
    return 0


def _inspect(args: argparse.Namespace) -> int:
    app_dir = args.app_dir.resolve()
    # Only the choice of settings file comes from the process environment (the test suite's guard).
    env = {k: os.environ[k] for k in (SETTINGS_FILE_VARIABLE,) if k in os.environ}
    load_local_settings(app_dir, env)
    config = DevhostConfig.from_env(app_dir, {**env}, data_dir=args.data_dir)
    path = config.data_dir / "durable.db"
    if not path.exists():
        print(f"devhost: no instances yet ({path} does not exist)", file=sys.stderr)
        return 1
    engine = DurableEngine(DurableStore(path), SystemClock(), frozenset())
    if args.command == "instances":
        statuses = {s for s in args.status.split(",") if s} or None
        rows = engine.list_instances(statuses)
        print(f"{'INSTANCE':40} {'NAME':24} {'STATUS':11} LAST UPDATED")
        for row in rows:
            print(
                f"{row['instanceId']:40} {row['name']:24} {row['runtimeStatus']:11} {row['lastUpdatedTime']}"
            )
        print(f"({len(rows)} instances)")
        return 0
    status = engine.status(args.instance_id, show_history=True)
    if status is None:
        print(f"devhost: no instance {args.instance_id}", file=sys.stderr)
        return 1
    print(json.dumps(status, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
