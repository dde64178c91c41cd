"""``python -m ops``: the operator's tools, against whichever profile the settings select.

    python -m ops submit --order-id ID [--app NAME] [--sku SKU] [--quantity N]
    python -m ops token --app NAME     # a registered submitting app's access token
    python -m ops status ID
    python -m ops list [--state Error] [--limit 50]
    python -m ops watch [--interval 2] [--once]
    python -m ops alerts [--limit 20]
    python -m ops resubmit ID          # E12: an Error order back to Pending, from its failed step
    python -m ops compensate ID        # undo an Error (or CompensationFailed) order
    python -m ops dlq list QUEUE
    python -m ops dlq resubmit QUEUE MESSAGE_ID
    python -m ops dashboard [--port 8765]   # the operator's picture on loopback (ops/dashboard.py)

Settings come from the environment, with ``local.settings.json`` (in ``--app-dir``) filling the
gaps. Add ``--json`` for machine-readable output. Exit codes: 0 done, 1 refused or not found.
"""

import argparse
import json
import os
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rich.console import Console
from rich.table import Table

from adapters.clock import host_clock
from adapters.factory import build_ports
from adapters.local_settings import load_local_settings
from domain.errors import DependencyUnavailable, IllegalTransition, RecordNotFound
from domain.states import ProcessState
from ops.dashboard import run_dashboard
from ops.tokens import TokenError, app_token
from services import frontend, operator
from services.context import Ports
from services.settings import Settings, SettingsError


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


class Refused(Exception):
    """An operator request the system will not carry out; the message says why."""


def _table(title: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
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

    # --- commands -------------------------------------------------------------------------------

    def submit(self, order_id: str, app: str, sku: str, quantity: int) -> None:
        price = Decimal("12.50")
        # Built as plain JSON, not as the model, so that the front end's validation judges it.
        order = {
            "OrderID": order_id,
            "Customer": "Operator",
            "Lines": [{"Sku": sku, "Quantity": quantity, "UnitPrice": float(price)}],
            "Total": float(price * quantity),
            "SubmittedAt": datetime.now(UTC).isoformat(),
        }
        # The operator submits as a registered app, with the token that app would send.
        token = app_token(self.ports.settings, submitter_name(self.ports.settings, app))
        headers = {"Authorization": f"Bearer {token}"}
        try:
            reply = frontend.accept_order(json.dumps(order).encode(), headers, self.ports)
        except DependencyUnavailable as outage:
            raise Refused(str(outage)) from None
        if reply.status != 202:
            raise Refused(f"{reply.body.get('error')}: {reply.body.get('detail')}")
        self.show("Submitted", [reply.body], ["OrderID", "statusUrl"])

    def status(self, order_id: str) -> None:
        reply = frontend.record_view(order_id, self.ports, owner=None)
        if reply.status == 404:
            raise Refused(f"no order {order_id!r}")
        self.show(f"Order {order_id}", [reply.body], list(reply.body))

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
        rows = [json.loads(m.body) for m in self.messaging.peek(self.ports.settings.alerts_queue, limit)]
        self.show("Operator alerts", rows, ["At", "Event", "OrderID", "Reason"])

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
            for m in self.messaging.peek(f"{queue}/$deadletterqueue", 1000)
        ]
        self.show(
            f"Dead letters of {queue}", rows, ["MessageId", "Reason", "Description", "Enqueued", "Deliveries"]
        )

    def dlq_resubmit(self, queue: str, message_id: str) -> None:
        if not self.messaging.resubmit_dead_letter(queue, message_id):
            raise Refused(f"no dead-lettered message {message_id!r} on {queue!r}")
        self.show("Resubmitted", [{"Queue": queue, "MessageId": message_id}], ["Queue", "MessageId"])


def submitter_name(settings: Settings, app: str) -> str:
    """``app`` as registered, or ``a`` for ``app-a``."""
    if settings.submitters.named(app) is None and settings.submitters.named(f"app-{app}") is not None:
        return f"app-{app}"
    return app


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ops", description=__doc__.split("\n")[0])
    parser.add_argument("--app-dir", type=Path, default=Path.cwd(), help="where local.settings.json is")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    commands = parser.add_subparsers(dest="command", required=True)
    submit = commands.add_parser("submit", help="submit a test order through the front end's checks")
    submit.add_argument("--order-id", required=True)
    submit.add_argument("--app", default="app-a", help="a name in SAS_SUBMITTERS (a: app-a)")
    submit.add_argument("--sku", default="SKU-1")
    submit.add_argument("--quantity", type=int, default=1)
    token = commands.add_parser("token", help="an access token of a registered submitting app")
    token.add_argument("--app", required=True, help="a name in SAS_SUBMITTERS")
    commands.add_parser("status", help="one order's state record").add_argument("order_id")
    listing = commands.add_parser("list", help="orders, optionally in one state")
    listing.add_argument("--state", choices=[s.value for s in ProcessState])
    listing.add_argument("--limit", type=int, default=50)
    watch = commands.add_parser("watch", help="orders per state, refreshed")
    watch.add_argument("--interval", type=float, default=2.0)
    watch.add_argument("--once", action="store_true")
    commands.add_parser("alerts", help="operator alerts").add_argument("--limit", type=int, default=20)
    commands.add_parser("resubmit", help="an Error order back to Pending (E12)").add_argument("order_id")
    commands.add_parser("compensate", help="undo an Error order").add_argument("order_id")
    dlq = commands.add_parser("dlq", help="dead-letter queues").add_subparsers(
        dest="dlq_command", required=True
    )
    board = commands.add_parser("dashboard", help="the operator's picture, live, on 127.0.0.1")
    board.add_argument("--port", type=int, default=8765, help="0 for any free port")
    dlq.add_parser("list").add_argument("queue")
    again = dlq.add_parser("resubmit")
    again.add_argument("queue")
    again.add_argument("message_id")
    return parser


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    args = _parser().parse_args(argv)
    console = console or Console()
    load_local_settings(args.app_dir.resolve())
    try:
        if args.command == "token":  # no stores needed
            settings = Settings.from_env(os.environ)
            issued = app_token(settings, submitter_name(settings, args.app))
            console.print(
                json.dumps({"access_token": issued}) if args.json else issued,
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
            return 0
        if args.command == "dashboard":  # builds its ports on its own store thread
            return run_dashboard(args.port, console)
        # From a shell, the system clock; beside an in-process devhost (tests), the host's time.
        ops = Ops(build_ports(Settings.from_env(os.environ), host_clock()), console, args.json)
        match args.command:
            case "submit":
                ops.submit(args.order_id, args.app, args.sku, args.quantity)
            case "status":
                ops.status(args.order_id)
            case "list":
                ops.list_orders(args.state, args.limit)
            case "watch":
                ops.watch(args.interval, args.once)
            case "alerts":
                ops.alerts(args.limit)
            case "resubmit" | "compensate":
                ops.move(args.order_id, args.command)
            case "dlq" if args.dlq_command == "list":
                ops.dlq_list(args.queue)
            case "dlq":
                ops.dlq_resubmit(args.queue, args.message_id)
    except (Refused, SettingsError, TokenError) as refused:
        console.print(f"[red]ops: {refused}[/]")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
