"""``python -m harness.demo`` (``make demo``): the whole pattern, live, with faults, judged at the end.

Starts the simulator (the flaky remote service) with a fault profile, devhost running
function_app.py, and two agent worker processes; two submitting apps post orders to the front
end and listen on their own status queues. Midway it SIGKILLs an agent and devhost itself and
restarts them (C12, R11). When every order is terminal it prints a summary and checks the
invariants; it exits non-zero if any fails.
"""

import argparse
import random
import shutil
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from adapters.servicebus.messages import dead_letter_queue
from domain.messages import QueuedOrder
from domain.record import StateRecord
from domain.states import TERMINAL_STATES, ProcessState
from harness.demo.apps import SubmittingApp, make_order
from harness.demo.judge import Check, Snapshot, judge
from harness.demo.report import render, verdict
from harness.demo.stack import Stack
from settings import Settings


@dataclass
class Run:
    stack: Stack
    apps: list[SubmittingApp]
    order_ids: list[str]
    started: float = field(default_factory=time.monotonic)
    events: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    recoveries: int = 0
    restarting: str | None = None  # the process chaos() killed, until it is back
    # When the terminal count last moved, and what the orders not yet terminal wait for.
    moved_at: float = field(default_factory=time.monotonic)
    waits: Counter[str] = field(default_factory=Counter)

    def poll(self) -> None:
        states = self.stack.states()
        try:
            records = [s.record for i in self.order_ids if (s := states.get(i)) is not None]
        finally:
            states.close()
        before = self.terminal
        self.counts = Counter(r.ProcessState.value for r in records)
        self.recoveries = sum(r.FailureCount for r in records)
        if self.terminal != before:
            self.moved_at = time.monotonic()
        now = datetime.now(UTC)
        self.waits = Counter(_wait(r, now) for r in records if r.ProcessState not in TERMINAL_STATES)

    def waiting_for(self) -> str | None:
        """Why the counts stand still, once they have for a few seconds: what the orders await."""
        still = time.monotonic() - self.moved_at
        if still < STILL_SECONDS or (not self.waits and self.restarting is None):
            return None
        parts = [f"{n} {what}" for what, n in self.waits.most_common()]
        if self.restarting is not None:
            parts.insert(0, f"{self.restarting} restarting (its work resumes from the durable stores)")
        return f"no order finished for {still:.0f}s: " + "; ".join(parts)

    def progress_line(self) -> str:
        accepted = sum(len(a.submitted_at) for a in self.apps)
        states = " ".join(f"{s.value}={self.counts[s.value]}" for s in ProcessState if self.counts[s.value])
        waiting = self.waiting_for()
        return (
            f"{time.monotonic() - self.started:6.1f}s accepted={accepted}/{len(self.order_ids)} "
            f"{states} recoveries={self.recoveries}" + (f" ({waiting})" if waiting else "")
        )

    @property
    def terminal(self) -> int:
        return sum(self.counts[s.value] for s in TERMINAL_STATES)

    def view(self) -> Group:
        table = Table(title=f"Scheduler Agent Supervisor — {time.monotonic() - self.started:5.1f}s")
        table.add_column("orders")
        table.add_column("count", justify="right")
        accepted = sum(len(a.submitted_at) for a in self.apps)
        table.add_row("accepted by the front end", f"{accepted}/{len(self.order_ids)}")
        for state in ProcessState:
            table.add_row(f"  {state.value}", str(self.counts[state.value]))
        table.add_row("supervisor recoveries", str(self.recoveries))
        bus = self.stack.bus()
        try:
            table.add_row("dead letters (orders)", str(bus.counts("orders")["dead_letter"]))
        finally:
            bus.close()
        for app in self.apps:
            table.add_row(f"status messages → {app.name}", str(sum(len(v) for v in app.statuses.values())))
        waiting = self.waiting_for()
        return Group(table, waiting) if waiting else Group(table)


# Counts that stand still this long get a line saying what the orders wait for.
STILL_SECONDS = 3.0


def _wait(record: StateRecord, now: datetime) -> str:
    """What one order not yet terminal waits for, from its state record."""
    if record.NotBefore is not None and record.NotBefore > now:
        return "wait out a retry's cooldown (NotBefore)"
    if record.ProcessState is ProcessState.PENDING:
        return "wait Pending for a free slot or the starter's sweep"
    if record.CurrentStep:
        return "wait in a step for the agent's reply or the step's deadline (CompleteBy)"
    return f"are {record.ProcessState.value}"


def chaos(run: Run, stop: threading.Event) -> None:
    """Kill an agent at a third of the way and devhost at half, and bring both back."""
    steps = [(0.3, "agent-0"), (0.5, "devhost")]
    for share, name in steps:
        while not stop.is_set() and run.terminal < share * len(run.order_ids):
            stop.wait(0.2)
        if stop.is_set():
            return
        run.events.append(f"[red]SIGKILL {name}[/] at {run.terminal} terminal orders")
        run.restarting = name
        run.stack.kill(name)
        if name == "devhost":
            run.stack.start_devhost()
        else:
            run.stack.start_agent(name)
        run.restarting = None
        run.events.append(f"[green]restarted {name}[/]")


def build_orders(count: int, seed: int) -> tuple[list, list]:  # type: ignore[type-arg]
    rng = random.Random(seed)
    per_app: list[list] = [[], []]  # type: ignore[type-arg]
    for n in range(count):
        app = n % 2
        # A few orders meet the demo's business rules: BLOCKED fails validation (Error), BACKORDER
        # fails after payment (compensated, newest first).
        sku = "BACKORDER-1" if n % 20 == 7 else "BLOCKED-1" if n % 30 == 11 else f"SKU-{rng.randint(1, 9)}"
        name = "app-a" if app == 0 else "app-b"
        per_app[app].append(make_order(f"{name}-{n:04d}", sku))
    return per_app[0], per_app[1]


def take_snapshot(run: Run) -> Snapshot:
    """What the judges look at, taken before the processes stop."""
    bus = run.stack.bus()
    try:
        dead = bus.peek(dead_letter_queue("orders"))
    finally:
        bus.close()
    records = {k: v for k, v in run.stack.records(run.order_ids).items() if v is not None}
    return Snapshot(run.stack.ledger("app-"), records, dead, time.monotonic() - run.started)


# What marks a directory as the demo's own: only such a directory is ever deleted.
MARKER = ".demo-workdir"


class WorkdirRefused(Exception):
    pass


def prepare_workdir(workdir: Path) -> None:
    """An empty work dir with the marker: a new or empty one is taken, one of an earlier run
    (it has the marker) is emptied, and anything else is refused, never deleted."""
    if workdir.exists() and not workdir.is_dir():
        raise WorkdirRefused(f"--workdir {workdir} is a file, not a directory")
    if workdir.is_dir() and any(workdir.iterdir()):
        if not (workdir / MARKER).is_file():
            raise WorkdirRefused(
                f"--workdir {workdir} is not empty and was not made by the demo (no {MARKER} in it): "
                "choose another --workdir, or remove it yourself"
            )
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("made by python -m harness.demo: the next run deletes this directory\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=150)
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--transient", type=float, default=0.15, help="transient fault rate")
    parser.add_argument("--permanent", type=float, default=0.02, help="permanent fault rate")
    parser.add_argument("--lost", type=float, default=0.05, help="lost-response rate (effect applied)")
    parser.add_argument("--outage", default="4:7", help="an outage window, START:END seconds ('' for none)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--duration", type=float, default=240, help="give up (exit 1) after this many seconds"
    )
    parser.add_argument("--no-chaos", action="store_true", help="do not kill and restart processes midway")
    parser.add_argument(
        "--broken-simulator",
        action="store_true",
        help="make the remote service apply repeated keys again, to show the judges catch it",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(".demo"),
        help=f"where the run keeps its data; emptied first only if an earlier run made it ({MARKER})",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the stack and its dashboard up after the run, until Ctrl-C"
    )
    return parser


def _profile(args: argparse.Namespace) -> dict[str, object]:
    return {
        "transient_rate": args.transient,
        "permanent_rate": args.permanent,
        "lost_response_rate": args.lost,
        "outage_windows": [[float(x) for x in args.outage.split(":")]] if args.outage else [],
        "latency_ms": [0, 20],
        "seed": args.seed,
        "broken_idempotency": args.broken_simulator,
    }


def _drive(run: Run, args: argparse.Namespace, console: Console, stop: threading.Event) -> bool:
    """Show the live view until every order is terminal and heard of; False on timeout."""
    apps = run.apps
    # One conflicting re-submission, straight onto the orders queue as a post racing the first
    # would arrive: it must be dead-lettered and its app told, not applied.
    first = apps[0].orders[0]
    conflict = QueuedOrder.model_validate(
        {
            **make_order(first.OrderID, "SKU-CONFLICT").model_dump(exclude={"StatusQueue"}),
            "SubmittedBy": "app-a",
        }
    )
    conflict_sent = False
    deadline = time.monotonic() + args.duration
    last_line = 0.0
    with Live(run.view(), console=console, refresh_per_second=4, transient=not console.is_terminal) as live:
        printed = 0
        while time.monotonic() < deadline:
            run.poll()
            # Each kill and restart as it happens, above the live view (rich's Live keeps it below).
            for event in run.events[printed:]:
                live.console.print(event)
            printed = len(run.events)
            live.update(run.view())
            if not console.is_terminal and time.monotonic() - last_line >= 2:
                last_line = time.monotonic()  # no live view in a log: a progress line instead
                console.print(run.progress_line(), highlight=False)
            if not conflict_sent and first.OrderID in apps[0].submitted_at:
                run.stack.submit([conflict], message_id="conflicting-resubmission")
                conflict_sent = True
            answered = sum(len(a.submitted_at) + len(a.rejected) for a in apps)
            heard = all(app.terminal_statuses(i) for app in apps for i in app.submitted_at)
            if answered == args.orders and run.terminal == len(run.order_ids) and heard:
                return True
            stop.wait(0.25)
    return False


def _explore(console: Console, dashboard: str) -> None:
    """--keep: the stack stays up for exploring until Ctrl-C; then the demo reports as usual."""
    never = threading.Event()  # the demo's own stop event is set by now
    try:  # Ctrl-C may come at once, while this line is still being written
        console.print(
            f"[bold]--keep[/]: the stack stays up; the dashboard is at {dashboard}. Ctrl-C ends the demo."
        )
        while not never.wait(3600):
            pass
    except KeyboardInterrupt:
        console.print("ending the demo")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=140)  # logs and CI: wide enough that no table wraps
    try:
        prepare_workdir(args.workdir)
    except WorkdirRefused as refused:
        console.print(f"demo: {refused}", style="red", markup=False, highlight=False, soft_wrap=True)
        return 2
    stack = Stack(args.workdir.resolve(), agents=args.agents, profile=_profile(args))
    console.print(f"[bold]Starting[/] the simulator, devhost and {args.agents} agents in {args.workdir} …")
    # Settings first: a refused configuration must not leave a started stack behind.
    registry = Settings.from_env(stack.env).submitters
    try:
        stack.start()
    except BaseException:
        stack.stop()  # whatever did start (a later start-up step failed, or Ctrl-C)
        raise
    dashboard = stack.start_dashboard()
    console.print(f"[bold]Dashboard[/] (live, read-only): {dashboard}", highlight=False)
    orders_a, orders_b = build_orders(args.orders, args.seed)
    bus_path = str(stack.workdir / "servicebus.db")
    apps = [
        SubmittingApp(
            app.name, app.client_id, stack.devhost_url, bus_path, orders, stack.token_source(app.name)
        )
        for app, orders in zip(registry.apps, (orders_a, orders_b), strict=True)
    ]
    run = Run(stack, apps, [o.OrderID for o in orders_a + orders_b])
    stop = threading.Event()
    try:
        for app in apps:
            app.start()
        if not args.no_chaos:
            threading.Thread(target=chaos, args=(run, stop), daemon=True).start()
        ok = _drive(run, args, console, stop)
    finally:
        stop.set()
        for app in apps:
            app.stop()
        # Taken before --keep's wait: Ctrl-C reaches the whole process group, so the simulator
        # whose ledger the judges read may be gone by the time it ends.
        snapshot = take_snapshot(run)
        if args.keep:
            _explore(console, dashboard)
        codes = stack.stop()
    console.print(f"processes stopped with exit codes {codes}")
    render(apps, snapshot, console)
    checks = judge(apps, snapshot, int(stack.env["SAS_MAX_CALLS_PER_STEP"]))
    checks.insert(0, Check("finished within --duration", ok, "" if ok else f"{args.duration}s passed"))
    return verdict(checks, console)


if __name__ == "__main__":
    sys.exit(main())
