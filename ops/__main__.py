"""``python -m ops``: the operator's tools, against whichever profile the settings select.

    python -m ops submit --order-id ID [--app NAME] [--sku SKU] [--quantity N]
    python -m ops token --app NAME     # a registered submitting app's access token
    python -m ops smoke [--app NAME] [--timeout 120]   # one order, to its final status
    python -m ops status ID            # one order's state record, one field a line
    python -m ops show ID              # its timeline: record, orders row, compensation, messages
    python -m ops list [--state Error] [--limit 50]
    python -m ops watch [--interval 2] [--once]
    python -m ops alerts [--limit 20]
    python -m ops alerts ack MESSAGE_ID...   # remove the alerts dealt with
    python -m ops alerts drain [--event E]   # remove every alert (of one event)
    python -m ops resubmit ID          # E12: an Error order back to Pending, from its failed step
    python -m ops compensate ID        # undo an Error (or CompensationFailed) order
    python -m ops dlq list QUEUE
    python -m ops dlq resubmit QUEUE MESSAGE_ID
    python -m ops schema               # create or migrate the orders database's schema (idempotent)
    python -m ops schema --script sqlserver   # the same as a sqlcmd script (the post-provision step)
    python -m ops dashboard [--port 8765]   # the operator's picture on loopback (ops/dashboard.py)

Settings come from the environment, with ``local.settings.json`` (in ``--app-dir``) filling the
gaps. ``--json`` (before or after the command) gives machine-readable output. Exit codes: 0 done,
1 refused or not found, 2 a bad argument or settings, 3 a store or the bus is unavailable.
"""

import argparse
import json
import os
import sys
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, NoReturn, Protocol, runtime_checkable

from rich.console import Console
from rich.table import Table

from adapters.clock import host_clock
from adapters.local_settings import load_local_settings
from adapters.servicebus.messages import QueueNotFound
from adapters.sql import schema
from bootstrap import build_ports, create_orders_schema
from domain.apps import RegistryError, SubmittingApp
from domain.errors import DependencyUnavailable, IllegalTransition, RecordNotFound
from domain.record import StateRecord
from domain.states import ProcessState
from ops.dashboard import run_dashboard
from ops.tokens import TokenError, app_token
from services import frontend, operator
from services.context import Ports
from settings import Settings, SettingsError


class BrowsedMessage(Protocol):
    @property
    def message_id(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def delivery_count(self) -> int: ...
    @property
    def enqueued_time(self) -> datetime: ...
    @property
    def dead_letter_reason(self) -> str | None: ...
    @property
    def dead_letter_error_description(self) -> str | None: ...


@runtime_checkable
class QueueBrowser(Protocol):
    """What both messaging adapters (the local bus, Service Bus) offer operators."""

    def peek(self, queue: str, limit: int) -> Sequence[BrowsedMessage]: ...
    def resubmit_dead_letter(self, queue: str, message_id: str) -> bool: ...
    def remove(self, queue: str, message_ids: set[str] | None) -> list[str]: ...


class Refused(Exception):
    """An operator request the system will not carry out; the message says why."""


class BadArgument(Exception):
    """An argument the settings do not know (an app, a queue); the message lists what they know."""


EXIT_REFUSED, EXIT_USAGE, EXIT_UNAVAILABLE = 1, 2, 3
# The status messages after which an order's status changes no more (domain.messages.OrderStatus).
FINAL_STATUSES = frozenset({"rejected", "completed", "failed", "compensated", "compensation-failed"})


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    return str(value)


def _iso(at: datetime | str | None) -> str:
    """One spelling for every store's times (``Z`` or ``+00:00``), so that they sort as times."""
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            return str(at)
    if at is None:
        return ""
    return at.astimezone(UTC).isoformat(timespec="milliseconds")


def _progress(record: StateRecord) -> str:
    """Where the order stands, from its state record: state, attempt, steps, failures."""
    parts = [
        f"{record.ProcessState.value}, attempt {record.Attempt}, {record.FailureCount} failure(s)",
        f"steps done: {', '.join(record.CompletedSteps) or 'none'}",
    ]
    if record.CurrentStep:
        parts.append(f"current step {record.CurrentStep}")
    if record.StepFailures:
        parts.append("step failures " + ", ".join(f"{k}={v}" for k, v in record.StepFailures.items()))
    if record.FailedStep:
        parts.append(f"failed step {record.FailedStep}")
    if record.CompensatedSteps:
        parts.append(f"compensated: {', '.join(record.CompensatedSteps)}")
    if record.LastError:
        parts.append(f"last error: {record.LastError}")
    if record.NotBefore:
        parts.append(f"not before {_iso(record.NotBefore)}")
    return "; ".join(parts)


def _table(title: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")  # an ID cut short cannot be pasted back
    for row in rows:
        table.add_row(*("" if row.get(c) is None else str(row.get(c)) for c in columns))
    return table


class Ops:
    def __init__(self, ports: Ports, console: Console, as_json: bool) -> None:
        self.ports = ports
        self.console = console
        self.as_json = as_json

    def show(self, title: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
        if self.as_json:
            self.console.print_json(json.dumps(list(rows), default=str))
        else:
            self.console.print(_table(title, rows, columns))

    @property
    def messaging(self) -> QueueBrowser:
        # The messaging adapter itself: the sender is wrapped in the transient-fault policy.
        messaging = self.ports.settlement
        if not isinstance(messaging, QueueBrowser):
            raise Refused(f"queue browsing is not available for profile {self.ports.settings.profile!r}")
        return messaging

    def registered_app(self, name: str) -> SubmittingApp:
        return registered(self.ports.settings, name)

    def known_queue(self, queue: str) -> str:
        settings = self.ports.settings
        known = [
            settings.orders_queue,
            settings.agent_requests_queue,
            settings.agent_replies_queue,
            settings.alerts_queue,
            *settings.submitters.status_queues,
        ]
        if queue not in known:
            raise BadArgument(f"unknown queue {queue!r} (the app's queues: {', '.join(known)})")
        return queue

    def show_fields(self, title: str, row: dict[str, Any]) -> None:
        """One record, one field a line: readable at 80 columns however many fields it has."""
        if self.as_json:
            self.console.print_json(json.dumps([row], default=str))
            return
        table = Table(title=title, show_header=False, box=None, title_justify="left")
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for name, value in row.items():
            table.add_row(name, _text(value))
        self.console.print(table)

    # --- commands -------------------------------------------------------------------------------

    def submit(self, order_id: str, app: str, sku: str, quantity: int) -> None:
        self.show("Submitted", [self._submit(order_id, app, sku, quantity)], ["OrderID", "statusUrl"])

    def _submit(self, order_id: str, app: str, sku: str, quantity: int) -> dict[str, Any]:
        price = Decimal("12.50")
        # Built as plain JSON, not as the model, so that the front end's validation judges it.
        order = {
            "OrderID": order_id,
            "Customer": "Operator",
            "Lines": [{"Sku": sku, "Quantity": quantity, "UnitPrice": float(price)}],
            "Total": float(price * quantity),
            "SubmittedAt": datetime.now(UTC).isoformat(),
        }
        registered = self.registered_app(app)
        # The operator submits on behalf of a registered app, with the token that app would send.
        headers = {"Authorization": f"Bearer {app_token(self.ports.settings, registered.name)}"}
        reply = frontend.accept_order(json.dumps(order).encode(), headers, self.ports)
        if reply.status != 202:
            raise Refused(f"{reply.body.get('error')}: {reply.body.get('detail')}")
        return reply.body

    def smoke(self, app: str, timeout: float, interval: float) -> None:
        """One new order as ``app``, followed to its final status on that app's status queue, each
        step printed as it happens (JSON Lines with --json); refused unless it completed."""
        registered = self.registered_app(app)
        queue = registered.status_queue
        order_id = f"smoke-{uuid.uuid4().hex[:12]}"  # new each run: a used ID is a conflict
        self._step("submitted", self._submit(order_id, registered.name, "SKU-1", 1))
        deadline = self.ports.clock.now() + timedelta(seconds=timeout)
        pause = threading.Event()
        seen = 0
        while True:
            statuses = self._bodies(queue, order_id)  # peeked: the app's own receiver still gets them
            for body in statuses[seen:]:
                self._step(f"status on {queue}", body)
            seen = len(statuses)
            final = next((b for b in statuses if b.get("Status") in FINAL_STATUSES), None)
            if final is not None:
                break
            if self.ports.clock.now() >= deadline:
                raise Refused(f"{order_id}: no final status on {queue} within {timeout:g}s")
            pause.wait(interval)
        if final["Status"] != "completed":
            raise Refused(f"{order_id} ended {final['Status']}: {final.get('Detail') or 'no detail'}")
        self._step("ok", {"OrderID": order_id, "Status": "completed"})

    def _step(self, what: str, body: dict[str, Any]) -> None:
        if self.as_json:
            self.console.file.write(json.dumps({"Step": what, **body}, default=str) + "\n")
            self.console.file.flush()
            return
        detail = ", ".join(f"{k}={v}" for k, v in body.items() if v is not None)
        self.console.print(f"smoke: {what}: {detail}", markup=False, highlight=False, soft_wrap=True)

    def status(self, order_id: str) -> None:
        reply = frontend.record_view(order_id, self.ports, owner=None)
        if reply.status == 404:
            raise Refused(f"no order {order_id!r}")
        self.show_fields(f"Order {order_id}", reply.body)

    def timeline(self, order_id: str) -> None:
        """What every store holds of the order, in time order: the state record, the orders row,
        the compensation log, and the status messages and alerts still on their queues."""
        stored = self.ports.states.get(order_id)
        row = self.ports.orders.get(order_id)
        if stored is None and row is None:
            raise Refused(f"no order {order_id!r}")
        events: list[dict[str, Any]] = []

        def event(at: datetime | str | None, source: str, what: str) -> None:
            events.append({"At": _iso(at), "Source": source, "Event": what})

        if row is not None:
            event(row.CreatedAt, "orders database", f"received: {len(row.Lines)} line(s), total {row.Total}")
            event(row.UpdatedAt, "orders database", f"status {row.Status}")
        if stored is not None:
            record = stored.record
            event(record.CreatedAt, "state record", "created (Pending)")
            event(record.UpdatedAt, "state record", _progress(record))
        for entry in self.ports.compensation_log.entries(order_id):
            event(entry.RecordedAt, "compensation log", f"{entry.Step} done: undo with {entry.Action}")
            if entry.Outcome is not None:
                outcome = f"{entry.Action}: {entry.Outcome}" + (f" ({entry.Error})" if entry.Error else "")
                event(entry.OutcomeAt, "compensation log", outcome)
        queue = row.StatusQueue if row is not None else stored.record.StatusQueue if stored else None
        for name in filter(None, [queue]):
            for body in self._bodies(name, order_id):
                detail = f": {body['Detail']}" if body.get("Detail") else ""
                event(body.get("At"), name, f"status {body.get('Status')}{detail}")
        for body in self._bodies(self.ports.settings.alerts_queue, order_id):
            event(
                body.get("At"), self.ports.settings.alerts_queue, f"{body.get('Event')}: {body.get('Reason')}"
            )
        events.sort(key=lambda e: e["At"])
        self.show(f"Order {order_id}", events, ["At", "Source", "Event"])

    def _bodies(self, queue: str, order_id: str) -> list[dict[str, Any]]:
        bodies = []
        for message in self.messaging.peek(queue, 1000):
            try:
                body = json.loads(message.body)
            except ValueError:
                continue
            if isinstance(body, dict) and body.get("OrderID") == order_id:
                bodies.append(body)
        return bodies

    def list_orders(self, state: str | None, limit: int) -> None:
        states = [ProcessState(state)] if state else list(ProcessState)
        rows = [
            {
                "OrderID": s.record.OrderID,
                "ProcessState": s.record.ProcessState.value,
                "Attempt": s.record.Attempt,
                "FailureCount": s.record.FailureCount,
                "FailedStep": s.record.FailedStep,
                "LastError": (s.record.LastError or "")[:60],
            }
            for one in states
            for s in self.ports.states.query_in_state(one, limit)
        ][:limit]
        self.show(f"Orders{f' in {state}' if state else ''}", rows, list(rows[0]) if rows else ["OrderID"])

    def counts(self) -> list[dict[str, Any]]:
        return [
            {"ProcessState": s.value, "orders": self.ports.states.count_in_states(frozenset({s}))}
            for s in ProcessState
        ]

    def watch(self, interval: float, once: bool) -> None:
        pause = threading.Event()
        while True:
            self.show(
                f"Orders by state at {datetime.now(UTC):%H:%M:%S}", self.counts(), ["ProcessState", "orders"]
            )
            if once or pause.wait(interval):
                return

    def alerts(self, limit: int) -> None:
        rows = [
            {"MessageId": m.message_id, **json.loads(m.body)}
            for m in self.messaging.peek(self.ports.settings.alerts_queue, limit)
        ]
        self.show("Operator alerts", rows, ["MessageId", "At", "Event", "OrderID", "Reason"])

    def alerts_remove(self, message_ids: list[str] | None, event: str | None) -> None:
        """Acknowledge alerts by removing them from the queue (which clears the alert rule)."""
        queue = self.ports.settings.alerts_queue
        wanted: set[str] | None = None if message_ids is None else set(message_ids)
        if event is not None:
            wanted = {
                m.message_id
                for m in self.messaging.peek(queue, 10_000)
                if json.loads(m.body).get("Event") == event
            }
        removed = self.messaging.remove(queue, wanted)
        missing = sorted((set(message_ids) if message_ids else set()) - set(removed))
        if missing:
            raise Refused(f"no alert {', '.join(map(repr, missing))} on {queue!r} (removed {len(removed)})")
        self.show("Acknowledged", [{"MessageId": m} for m in removed], ["MessageId"])

    def move(self, order_id: str, action: str) -> None:
        move = operator.resubmit if action == "resubmit" else operator.request_compensation
        try:
            record = move(self.ports.states, self.ports.clock, order_id)
        except RecordNotFound:
            raise Refused(f"no order {order_id!r}") from None
        except IllegalTransition as illegal:
            raise Refused(str(illegal)) from None
        self.show(
            f"{action}: {order_id}",
            [
                {
                    "OrderID": order_id,
                    "ProcessState": record.ProcessState.value,
                    "CompensationRequested": record.CompensationRequested,
                }
            ],
            ["OrderID", "ProcessState", "CompensationRequested"],
        )

    def dlq_list(self, queue: str) -> None:
        rows = [
            {
                "MessageId": m.message_id,
                "Reason": m.dead_letter_reason,
                "Description": (m.dead_letter_error_description or "")[:80],
                "Enqueued": m.enqueued_time.isoformat(timespec="seconds"),
                "Deliveries": m.delivery_count,
            }
            for m in self.messaging.peek(f"{self.known_queue(queue)}/$deadletterqueue", 1000)
        ]
        self.show(
            f"Dead letters of {queue}", rows, ["MessageId", "Reason", "Description", "Enqueued", "Deliveries"]
        )

    def dlq_resubmit(self, queue: str, message_id: str) -> None:
        if not self.messaging.resubmit_dead_letter(self.known_queue(queue), message_id):
            raise Refused(f"no dead-lettered message {message_id!r} on {queue!r}")
        self.show("Resubmitted", [{"Queue": queue, "MessageId": message_id}], ["Queue", "MessageId"])


def registered(settings: Settings, name: str) -> SubmittingApp:
    """An app of SAS_SUBMITTERS by its name (``app-c``), or by the part after ``app-`` (``c``)."""
    submitters = settings.submitters
    found = submitters.named(name) or submitters.named(f"app-{name}")
    if found is None:
        known = ", ".join(a.name for a in submitters.apps) or "none"
        raise BadArgument(f"--app {name!r} is not a registered app (SAS_SUBMITTERS: {known})")
    return found


def registered_name(settings: Settings, name: str) -> str:
    return registered(settings, name).name


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, as every other refusal: what is wrong, and where the usage is.
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    # The options every command takes, before or after it: SUPPRESS, so that one given after the
    # command does not reset one given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--app-dir", type=Path, default=argparse.SUPPRESS, help="where local.settings.json is"
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
    )
    parser = _Parser(prog="python -m ops", description=__doc__.split("\n")[0])
    # Its own actions, with defaults: ``common``'s are shared by every command, and
    # set_defaults here would change their default too.
    parser.add_argument("--app-dir", type=Path, default=Path.cwd(), help="where local.settings.json is")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def command(name: str, help: str, parent: Any = commands) -> argparse.ArgumentParser:
        added: argparse.ArgumentParser = parent.add_parser(name, help=help, parents=[common])
        return added

    submit = command("submit", "submit a test order through the front end's checks")
    submit.add_argument("--order-id", required=True)
    submit.add_argument("--app", default="a", help="a registered app: its name (app-c) or c")
    submit.add_argument("--sku", default="SKU-1")
    submit.add_argument("--quantity", type=int, default=1)
    command("token", "an access token of a registered submitting app").add_argument(
        "--app", required=True, help="a registered app: its name (app-c) or c"
    )
    command("status", "one order's state record").add_argument("order_id")
    command("show", "one order's timeline from every store").add_argument("order_id")
    listing = command("list", "orders, optionally in one state")
    listing.add_argument("--state", choices=[s.value for s in ProcessState])
    listing.add_argument("--limit", type=int, default=50)
    watch = command("watch", "orders per state, refreshed")
    watch.add_argument("--interval", type=float, default=2.0)
    watch.add_argument("--once", action="store_true")
    alerts = command("alerts", "operator alerts: list (the default), ack or drain")
    alerts.add_argument("--limit", type=int, default=20)
    alert_commands = alerts.add_subparsers(dest="alerts_command", parser_class=_Parser)
    command("list", "the alerts waiting", alert_commands)
    command("ack", "remove the alerts dealt with", alert_commands).add_argument("message_id", nargs="+")
    drain = command("drain", "remove every alert waiting", alert_commands)
    drain.add_argument("--event", help="only the alerts of this Event (e.g. OrderFailed)")
    command("resubmit", "an Error order back to Pending (E12)").add_argument("order_id")
    command("compensate", "undo an Error order").add_argument("order_id")
    dlq = command("dlq", "dead-letter queues").add_subparsers(
        dest="dlq_command", required=True, parser_class=_Parser
    )
    board = command("dashboard", "the operator's picture, live, on 127.0.0.1")
    board.add_argument("--port", type=int, default=8765, help="0 for any free port")
    command("list", "a queue's dead letters", dlq).add_argument("queue")
    again = command("resubmit", "move one dead letter back to its queue", dlq)
    again.add_argument("queue")
    again.add_argument("message_id")
    smoke = command("smoke", "submit one order as an app and wait for its final status")
    smoke.add_argument("--app", default="a", help="a registered app: its name (app-c) or c")
    smoke.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the final status")
    smoke.add_argument("--interval", type=float, default=1.0, help="seconds between looks at the queue")
    schema = command("schema", "create or migrate the orders database's schema")
    schema.add_argument(
        "--script", choices=["sqlserver", "postgresql", "sqlite"], help="print the DDL instead of running it"
    )
    return parser


def _schema(script: str | None, console: Console, as_json: bool) -> int:
    if script:
        # Plain text, as sqlcmd reads it: no markup, highlighting or wrapping.
        console.file.write(schema.script(script))
        return 0
    settings = Settings.from_env(os.environ)
    changed = create_orders_schema(settings)
    if as_json:
        console.print_json(json.dumps({"profile": settings.profile, "changed": changed}))
    else:
        console.print(f"orders schema ({settings.profile}): {'; '.join(changed) or 'up to date'}")
    return 0


def _token(app: str, console: Console, as_json: bool) -> int:
    settings = Settings.from_env(os.environ)
    issued = app_token(settings, registered_name(settings, app))
    console.print(
        json.dumps({"access_token": issued}) if as_json else issued,
        soft_wrap=True,
        markup=False,
        highlight=False,
    )
    return 0


def _run(args: argparse.Namespace, console: Console) -> int:
    load_local_settings(args.app_dir.resolve())
    storeless = {  # no stores needed, or (the dashboard) its own, on its own store thread
        "dashboard": lambda: run_dashboard(args.port, console),
        "schema": lambda: _schema(args.script, console, args.json),
        "token": lambda: _token(args.app, console, args.json),
    }
    if args.command in storeless:
        return storeless[args.command]()
    # From a shell, the system clock; beside an in-process devhost (tests), the host's time.
    ops = Ops(build_ports(Settings.from_env(os.environ), host_clock()), console, args.json)
    match args.command:
        case "submit":
            ops.submit(args.order_id, args.app, args.sku, args.quantity)
        case "status":
            ops.status(args.order_id)
        case "smoke":
            ops.smoke(args.app, args.timeout, args.interval)
        case "show":
            ops.timeline(args.order_id)
        case "list":
            ops.list_orders(args.state, args.limit)
        case "watch":
            ops.watch(args.interval, args.once)
        case "alerts" if args.alerts_command in ("ack", "drain"):
            # ack names the alerts (message_id), drain at most an event: each lacks the other.
            ops.alerts_remove(getattr(args, "message_id", None), getattr(args, "event", None))
        case "alerts":
            ops.alerts(args.limit)
        case "resubmit" | "compensate":
            ops.move(args.order_id, args.command)
        case "dlq" if args.dlq_command == "list":
            ops.dlq_list(args.queue)
        case "dlq":
            ops.dlq_resubmit(args.queue, args.message_id)
    return 0


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    args = _parser().parse_args(argv)
    console = console or Console()
    errors = Console(file=sys.stderr) if console.file is sys.stdout else console
    try:
        return _run(args, console)
    except (Refused, TokenError) as refused:
        code, message = EXIT_REFUSED, str(refused)
    except (BadArgument, SettingsError, RegistryError, QueueNotFound) as bad:
        code, message = EXIT_USAGE, str(bad)
    except DependencyUnavailable as outage:
        code, message = EXIT_UNAVAILABLE, str(outage)
    # One line, never wrapped or marked up: what went wrong, for a person or a script.
    errors.print(f"ops: {message}", style="red", markup=False, highlight=False, soft_wrap=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
