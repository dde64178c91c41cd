"""The demo's report: what the run did, in tables, and the invariants' verdict."""

import statistics
from collections import Counter

from rich.console import Console
from rich.table import Table

from domain.states import ProcessState
from harness.demo.apps import SubmittingApp
from harness.demo.judge import FORWARD, UNDO, Check, Snapshot

NOT_PROCESSED = frozenset({ProcessState.ERROR, ProcessState.COMPENSATED, ProcessState.COMPENSATION_FAILED})


def render(apps: list[SubmittingApp], snapshot: Snapshot, console: Console) -> None:
    """What the run did: final states, remote calls against effects, dead letters, latency."""
    ledger, records, elapsed = snapshot.ledger, snapshot.records, snapshot.elapsed
    states = Counter(r.ProcessState for r in records.values())
    table = Table(title="Orders by final state")
    table.add_column("state")
    table.add_column("orders", justify="right")
    for state in ProcessState:
        table.add_row(state.value, str(states[state]))
    table.add_row("attempts (total)", str(sum(r.Attempt for r in records.values())))
    table.add_row("supervisor recoveries", str(sum(r.FailureCount for r in records.values())))
    table.add_row("compensations run", str(sum(len(r.CompensatedSteps) for r in records.values())))
    console.print(table)

    calls = Table(title="Remote calls vs effects, per action")
    for column in ("action", "calls", "effects", "orders"):
        calls.add_column(column, justify="right" if column != "action" else "left")
    for action in (*FORWARD, *UNDO.values()):
        keys = {k: v for k, v in ledger.items() if k.endswith(f":{action}")}
        calls.add_row(
            action,
            str(sum(v["calls"] for v in keys.values())),
            str(sum(v["effects"] for v in keys.values())),
            str(len(keys)),
        )
    console.print(calls)

    unfinished = sorted(
        (r for r in records.values() if r.ProcessState in NOT_PROCESSED), key=lambda r: r.OrderID
    )
    if unfinished:
        why = Table(title="Orders not processed, and why")
        for column in ("order", "state", "failed step", "compensated", "reason"):
            why.add_column(column, overflow="fold")
        for record in unfinished:
            why.add_row(
                record.OrderID,
                record.ProcessState.value,
                record.FailedStep or "",
                ", ".join(record.CompensatedSteps),
                record.LastError or "",
            )
        console.print(why)

    dead = snapshot.dead
    if dead:
        dlq = Table(title="Dead-lettered submissions")
        # Folded, never cut: the description is the reason an operator acts on.
        for column in ("message", "reason", "description"):
            dlq.add_column(column, overflow="fold")
        for message in dead:
            dlq.add_row(
                message.message_id,
                message.dead_letter_reason or "",
                message.dead_letter_error_description or "",
            )
        console.print(dlq)

    latencies = sorted(
        app.finished_at[i] - app.submitted_at[i]
        for app in apps
        for i in app.finished_at
        if i in app.submitted_at
    )
    perf = Table(title="Throughput and latency (submit → terminal status)")
    perf.add_column("measure")
    perf.add_column("value", justify="right")
    perf.add_row("orders/s", f"{len(records) / elapsed:.1f}")
    if latencies:
        quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [latencies[0]] * 99
        for label, index in (("p50", 49), ("p90", 89), ("p99", 98)):
            perf.add_row(f"latency {label}", f"{quantiles[index]:.2f}s")
    for app in apps:
        perf.add_row(
            f"{app.name}: status messages / throttled (429)",
            f"{sum(len(v) for v in app.statuses.values())} / {app.throttled}",
        )
    console.print(perf)


def verdict(checks: list[Check], console: Console) -> int:
    """Print the invariants' table; 1 if any failed, else 0."""
    verdict = Table(title="Invariants")
    verdict.add_column("check")
    verdict.add_column("result")
    for name, passed, detail in checks:
        verdict.add_row(name, "[green]✓[/]" if passed else f"[red]✗ {detail}[/]")
    console.print(verdict)
    failed = [name for name, passed, _ in checks if not passed]
    if failed:
        console.print(f"[bold red]{len(failed)} invariant(s) failed[/]")
        return 1
    console.print("[bold green]All invariants hold.[/]")
    return 0
