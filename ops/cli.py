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
    python -m ops instances --name order_workflow_v1 [--status Running,Pending]   # drain check
    python -m ops replay export --out DIR | replay check PATH   # replay safety (ops/replay.py)
    python -m ops --azd [--azd-env NAME] smoke|status|show|list|watch|alerts|dlq|instances   # ops/azd.py

Settings come from the environment, with ``local.settings.json`` (in ``--app-dir``) filling the
gaps; with ``--azd``, from the azd environment's values instead. ``--json`` (before or after the
command) gives machine-readable output. Exit codes: 0 done, 1 refused or not found, 2 a bad
argument or settings, 3 a store or the bus is unavailable.
"""

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import argcomplete
from rich.console import Console

from adapters.clock import host_clock
from adapters.local_settings import load_local_settings
from adapters.servicebus.messages import QueueNotFound
from bootstrap import build_ports
from domain.apps import RegistryError
from domain.errors import DependencyUnavailable
from domain.states import ProcessState
from ops import alerts, azd, dead_letters, instances, local_stack, orders, queues, replay, schema, smoke
from ops.dashboard import run_dashboard
from ops.errors import EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE, BadArgument, Refused
from ops.output import Output
from ops.queues import QueueBrowser
from ops.tokens import TokenError, show_token
from services.context import Ports
from settings import Settings, SettingsError

__all__ = ["EXIT_REFUSED", "EXIT_UNAVAILABLE", "EXIT_USAGE", "main"]

AZD_HELP = "against the deployment of the current azd environment (ops/azd.py)"
AZD_ENV_HELP = "against this azd environment's deployment (implies --azd)"


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
    common.add_argument("--azd", action="store_true", default=argparse.SUPPRESS, help=AZD_HELP)
    common.add_argument("--azd-env", metavar="NAME", default=argparse.SUPPRESS, help=AZD_ENV_HELP)
    parser = _Parser(prog="python -m ops", description=(__doc__ or "").split("\n")[0])
    # Its own actions, with defaults: ``common``'s are shared by every command, and
    # set_defaults here would change their default too.
    parser.add_argument("--app-dir", type=Path, default=Path.cwd(), help="where local.settings.json is")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--azd", action="store_true", help=AZD_HELP)
    parser.add_argument("--azd-env", metavar="NAME", help=AZD_ENV_HELP)
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
    alert = command("alerts", "operator alerts: list (the default), ack or drain")
    alert.add_argument("--limit", type=int, default=20)
    alert_commands = alert.add_subparsers(dest="alerts_command", parser_class=_Parser)
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
    smoking = command("smoke", "submit one order as an app and wait for its final status")
    smoking.add_argument(
        "--app", help="a registered app: its name (app-c) or c (default a; --azd: the sample app)"
    )
    smoking.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the final status")
    smoking.add_argument("--interval", type=float, default=1.0, help="seconds between looks at the queue")
    ddl = command("schema", "create or migrate the orders database's schema")
    ddl.add_argument(
        "--script", choices=["sqlserver", "postgresql", "sqlite"], help="print the DDL instead of running it"
    )
    _durable(command)
    return parser


def _durable(command: replay.AddCommand) -> None:
    """The commands on the Durable task hub: the drain check, and replay safety."""
    _instances(command("instances", "Durable orchestration instances of one orchestrator (a drain check)"))
    replay.add_arguments(
        command("replay", "export Durable histories; replay them through today's code"), command
    )


def _instances(listed: argparse.ArgumentParser) -> None:
    listed.add_argument("--name", required=True, help="the orchestrator's name, e.g. order_workflow_v1")
    listed.add_argument(
        "--status",
        type=_statuses,
        default=instances.DEFAULT_STATUSES,
        help="comma-separated runtime statuses (default Running,Pending)",
    )
    listed.add_argument("--url", help="devhost's base URL (default http://127.0.0.1:$DEVHOST_PORT)")


def _statuses(text: str) -> tuple[str, ...]:
    try:
        return instances.runtime_statuses(text)
    except ValueError as unknown:
        raise argparse.ArgumentTypeError(str(unknown)) from None


def _run(args: argparse.Namespace, out: Output) -> int:
    if args.command == "replay":  # local or --azd: its own sources (ops/replay.py)
        return replay.run(args, out)
    if args.azd or args.azd_env:
        _on_deployment(args, out)
        return 0
    load_local_settings(args.app_dir.resolve())
    match args.command:  # no stores needed, or (the dashboard) its own, on its own store thread
        case "dashboard":
            local_stack.require_started(Settings.from_env(os.environ), args.app_dir.resolve())
            return run_dashboard(args.port, out.console)
        case "schema":
            schema.run(args.script, out)
        case "token":
            show_token(args.app, out)
        case "instances":
            url = args.url or instances.devhost_url()
            instances.show(out, args.name, args.status, instances.from_durable_api(url, args.status))
        case _:
            settings = Settings.from_env(os.environ)
            local_stack.require_started(settings, args.app_dir.resolve())
            # From a shell, the system clock; beside an in-process devhost (tests), the host's time.
            _on_ports(args, build_ports(settings, host_clock(), notes=False), out)
    return 0


def _on_stores(args: argparse.Namespace, ports: Ports, browser: QueueBrowser | None, out: Output) -> None:
    """The commands that read the stores, locally or (``browser``: its queues) on a deployment."""
    match args.command:
        case "status":
            orders.status(ports, out, args.order_id)
        case "show":
            orders.timeline(ports, out, args.order_id, browser)
        case "list":
            orders.list_orders(ports, out, args.state, args.limit)
        case "watch":
            orders.watch(ports, out, args.interval, args.once)


def _on_ports(args: argparse.Namespace, ports: Ports, out: Output) -> None:
    settings = ports.settings
    match args.command:
        case "submit":
            orders.submit(ports, out, args.order_id, app=args.app, sku=args.sku, quantity=args.quantity)
        case "status" | "show" | "list" | "watch":
            _on_stores(args, ports, None, out)
        case "smoke":
            smoke.smoke(smoke.local(ports, args.app or "a"), out, args.timeout, args.interval)
        case "alerts" | "dlq":
            _on_queues(args, settings, queues.browser(ports), out)
        case "resubmit" | "compensate":
            orders.move(ports, out, args.order_id, args.command)


def _on_queues(args: argparse.Namespace, settings: Settings, browser: QueueBrowser, out: Output) -> None:
    match args.command:
        case "alerts" if args.alerts_command in ("ack", "drain"):
            # ack names the alerts (message_id), drain at most an event: each lacks the other.
            message_ids, event = getattr(args, "message_id", None), getattr(args, "event", None)
            alerts.remove(settings, browser, out, message_ids, event)
        case "alerts":
            alerts.list_alerts(settings, browser, out, args.limit)
        case "dlq" if args.dlq_command == "list":
            dead_letters.list_dead_letters(settings, browser, out, args.queue)
        case "dlq":
            dead_letters.resubmit(settings, browser, out, args.queue, args.message_id)


def _on_deployment(args: argparse.Namespace, out: Output) -> None:
    """``--azd``: against a deployment, as the deployer (ops/azd.py says with which roles)."""
    if args.command not in azd.COMMANDS:
        raise BadArgument(
            f"--azd runs {', '.join(azd.COMMANDS)}; {args.command} "
            f"{azd.NOT_ON_A_DEPLOYMENT.get(args.command, 'is local only')} "
            '(docs/operating.md, "ops against a deployment")'
        )
    app_dir = args.app_dir.resolve()
    deployment = azd.Deployment(azd.read_values(app_dir, args.azd_env))
    if args.command == "instances":
        found = azd.task_hub_instances(deployment, azd.task_hub(deployment, app_dir), args.name, args.status)
        instances.show(out, args.name, args.status, found)
        return
    browser = deployment.queues()
    try:
        if args.command in azd.STORE_COMMANDS:
            with azd.store_errors():
                _on_stores(args, deployment.ports(browser), browser, out)
        elif args.command == "smoke":
            smoke.smoke(smoke.deployed(deployment, args.app, browser, out), out, args.timeout, args.interval)
        else:
            _on_queues(args, deployment.settings, browser, out)
    finally:
        browser.close()


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    parser = _parser()
    # Completing a command line (the shell sets _ARGCOMPLETE), it prints the completions and
    # exits; otherwise it returns at once.
    argcomplete.autocomplete(parser)
    args = parser.parse_args(argv)
    console = console or Console()
    errors = Console(file=sys.stderr) if console.file is sys.stdout else console
    try:
        return _run(args, Output(console, args.json))
    except (Refused, TokenError) as refused:
        code, message = EXIT_REFUSED, str(refused)
    except (BadArgument, SettingsError, RegistryError, QueueNotFound) as bad:
        code, message = EXIT_USAGE, str(bad)
    except (DependencyUnavailable, local_stack.NotStarted) as outage:
        code, message = EXIT_UNAVAILABLE, str(outage)
    # One line, never wrapped or marked up: what went wrong, for a person or a script.
    message = " ".join(message.split())  # an SDK's message may run over several lines
    errors.print(f"ops: {message}", style="red", markup=False, highlight=False, soft_wrap=True)
    return code
