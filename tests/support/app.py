"""The real function_app.py on devhost (embedded profile, virtual clock) with a scripted agent
(tests/support/scripted_agent.py), and orders as the app's tests submit them."""

import asyncio
import json
import os
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.clock import use_host_clock
from adapters.servicebus.messages import ReceivedMessage
from bootstrap import build_ports
from domain.messages import OrderLine, QueuedOrder
from domain.record import StateRecord
from domain.states import TERMINAL_STATES
from harness.devhost.clock import VirtualClock
from harness.devhost.host import Host
from harness.standins.local_issuer import LocalIssuer, from_settings
from services.context import Ports
from settings import Settings
from tests.support.scripted_agent import ScriptedAgent

ROOT = Path(__file__).resolve().parents[2]
# The local identities local.settings.embedded.json registers (SAS_SUBMITTERS), and one it does not.
CLIENT_IDS = {
    "app-a": "11111111-1111-1111-1111-111111111111",
    "app-b": "22222222-2222-2222-2222-222222222222",
    "app-z": "99999999-9999-9999-9999-999999999999",
}
# Where the app's virtual clock starts, and when its tests' orders were submitted.
APP_START = datetime.fromisoformat("2026-03-01T09:00:00+00:00")


def submission(order_id: str, *, app: str = "app-a", sku: str = "SKU-1", quantity: int = 2) -> QueuedOrder:
    """An order as the front end puts it on the orders queue, submitted by ``app``."""
    price = Decimal("10.00")
    return QueuedOrder(
        OrderID=order_id,
        Customer="Contoso",
        Lines=[OrderLine(Sku=sku, Quantity=quantity, UnitPrice=price)],
        Total=price * quantity,
        SubmittedBy=app,
        SubmittedAt=APP_START,
    )


def order_body(order_id: str, **changes: Any) -> str:
    """An order as a submitting app posts it to the front end (no identity in it)."""
    body = json.loads(submission(order_id).model_dump_json(exclude={"SubmittedBy", "StatusQueue"}))
    return json.dumps(body | changes)


class App:
    def __init__(
        self,
        host: Host,
        loop: asyncio.AbstractEventLoop,
        agent: ScriptedAgent,
        data: Path,
        issuer: LocalIssuer | None = None,
    ) -> None:
        self.host = host
        # The Entra stand-in whose tokens the front end verifies (SAS_AUTH_AUTHORITY).
        self.issuer = issuer
        self.loop = loop
        self.agent = agent
        self.bus = host.servicebus
        # In process, the app's own ports (function_app.ports is cached: this is the object it
        # uses), to close; worker processes close theirs as they exit.
        self._built: list[Ports] = [sys.modules["function_app"].ports()] if host.in_process else []
        # The same adapters the app uses, for whichever profile the settings select.
        ports = self.ports()
        self.states = ports.states
        self.compensation_log = ports.compensation_log

    def ports(self) -> Ports:
        """The same adapters the function app uses, built from the same settings."""
        built = build_ports(Settings.from_env(os.environ), self.host.clock)
        self._built.append(built)
        return built

    def succeeded_by(self, successor: "App") -> None:
        """A new deployment on the same data replaces this one: the fixture that stops this App
        then stops the successor's host and closes its adapters."""
        self.host = successor.host
        self._built = successor._built
        if successor.issuer is not self.issuer and self.issuer is not None:
            self.issuer.stop()
        self.issuer = successor.issuer

    def stop(self) -> None:
        """Stop the host and close every adapter the app and the test opened: a test process
        runs hundreds of hosts, and each left-open SQLite file is a descriptor (past 1024, the
        AMQP clients' select() in later tests can no longer wait on their sockets)."""
        self.loop.run_until_complete(self.host.stop())
        for ports in self._built:
            ports.close()
        if self.issuer is not None:
            self.issuer.stop()

    def token(self, app: str) -> str:
        """An application token for ``app``, with the submit role, issued now by the host's clock
        (the one the front end checks lifetimes against)."""
        assert self.issuer is not None, "this app was started without a local issuer"
        return self.issuer.mint(CLIENT_IDS[app], now=self.host.clock.now())

    def http(
        self,
        method: str,
        path: str,
        body: str | None = None,
        *,
        app: str | None = "app-a",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str, dict[str, str]]:
        """Call the front end as ``app`` (an application token from the local issuer, as a
        submitting app gets from Entra), or with no token with ``app=None``; ``headers`` go as given."""
        if headers is None:
            headers = {} if app is None else {"Authorization": f"Bearer {self.token(app)}"}

        async def call() -> tuple[int, str, dict[str, str]]:
            async with (
                aiohttp.ClientSession() as session,
                session.request(method, self.host.base_url + path, data=body, headers=headers) as response,
            ):
                return response.status, await response.text(), dict(response.headers)

        return self.loop.run_until_complete(call())

    def submit(self, order: QueuedOrder, message_id: str | None = None) -> None:
        """Put an order on the orders queue as the front end does (tests stand in for it)."""
        self.bus.send("orders", order.model_dump_json(), message_id=message_id or order.message_id())

    def send_raw(self, body: str, message_id: str) -> None:
        self.bus.send("orders", body, message_id=message_id)

    def record(self, order_id: str) -> StateRecord:
        stored = self.states.get(order_id)
        assert stored is not None, f"no state record for {order_id}"
        return stored.record

    def terminal(self, *order_ids: str) -> bool:
        for order_id in order_ids:
            stored = self.states.get(order_id)
            if stored is None or stored.record.ProcessState not in TERMINAL_STATES:
                return False
        return True

    def run_until(self, condition: Callable[[], bool], days: int = 2) -> None:
        self.loop.run_until_complete(self.host.run_until(condition, max_virtual_time=timedelta(days=days)))

    def run_until_terminal(self, *order_ids: str, days: int = 2) -> None:
        waiting = set(order_ids)

        def all_terminal() -> bool:
            # Within one run nothing leaves a terminal state (only operators do that).
            waiting.difference_update([o for o in list(waiting) if self.terminal(o)])
            return not waiting

        self.run_until(all_terminal, days=days)

    def settle(self, duration: timedelta) -> None:
        """Let the app run on for a while (virtual time), e.g. to prove nothing else happens."""
        until = self.host.clock.now() + duration
        self.run_until(lambda: self.host.clock.now() >= until)

    def statuses(self, queue: str) -> list[dict[str, Any]]:
        return [json.loads(m.body) for m in self.bus.peek(queue, 1000)]

    def alerts(self) -> list[dict[str, Any]]:
        return [json.loads(m.body) for m in self.bus.peek("operator-alerts", 1000)]

    def dead_letters(self, queue: str) -> list[ReceivedMessage]:
        return self.bus.peek(f"{queue}/$deadletterqueue", 1000)


def emulators_settings(*, cosmos: str, sql: str, dialect: str, tables: str, **extra: str) -> dict[str, str]:
    """The emulators profile: state in a Cosmos DB server, orders in SQL over ODBC, the
    compensation log in Azurite's Table Storage (messaging stays the local bus)."""
    return {
        "SAS_PROFILE": "emulators",
        "CosmosDBConnection": cosmos,
        "SqlConnection": sql,
        "SAS_SQL_DIALECT": dialect,
        "CompensationLogConnection": tables,
        **extra,
    }


def start_app(
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    clock: VirtualClock | None = None,
    settings: dict[str, str] | None = None,
    in_process: bool = False,
    issuer: LocalIssuer | None = None,
    app_dir: Path = ROOT,
) -> App:
    """The deployment package in a worker process, as on Azure; ``in_process`` imports the app
    into the test's process instead, for a test that replaces one of the app's objects. The front
    end trusts a local issuer started here (or ``issuer``, to keep one across deployments).
    ``app_dir`` is where the app is run from (the repository root, or a copy of its package)."""
    values = json.loads((ROOT / "local.settings.embedded.json").read_text())["Values"]
    if issuer is None:
        # Its token endpoint grants the submit role to the registered apps, as their assignments do.
        issuer = from_settings(values, port=0).start()
    values |= issuer.settings()
    data = tmp_path / "data"
    values |= {
        "SAS_DATA_DIR": str(data),
        "LOCAL_SERVICEBUS_PATH": str(tmp_path / "servicebus.db"),
        "DEVHOST_DATA_DIR": str(tmp_path / "devhost"),
    }
    values |= settings or {}
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    clock = clock or VirtualClock(APP_START)
    if issuer.clock is None:  # its token endpoint (ops token) issues by the host's time too
        issuer.clock = clock
    # What a test runs in its own process (the ops CLI, the scripted agent) reads the host's time.
    use_host_clock(clock)
    host = Host(
        app_dir, clock=clock, data_dir=tmp_path / "devhost", port=0, env=os.environ, in_process=in_process
    )
    loop.run_until_complete(host.start())
    agent = ScriptedAgent(host.servicebus, clock)
    host.extra_sources.append(agent)
    return App(host, loop, agent, data, issuer)
