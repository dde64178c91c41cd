"""The composition root: builds the adapters behind every port from the settings.

Function bodies, the agent and the operator tools all get their ports here, so switching a
profile is a settings change and nothing else.
"""

from datetime import datetime
from pathlib import Path

from adapters.clock import SystemClock
from adapters.sql_orders import sqlite_orders_repository
from adapters.sqlite_compensation_log import SqliteCompensationLog
from adapters.sqlite_state_store import SqliteStateStore
from services.context import Ports
from services.settings import Settings


class DevhostClock:
    """devhost's clock, so the app's CompleteBy and devhost's durable timers agree (tests run it virtual)."""

    def now(self) -> datetime:
        from devhost.clock import current_clock  # noqa: PLC0415 - embedded profile only

        return current_clock().now()


def build_ports(settings: Settings) -> Ports:
    if settings.profile == "emulators":
        from adapters import azure_stores  # noqa: PLC0415 - needs the Azure SDKs and pyodbc
        from adapters.local_messaging import LocalMessaging  # noqa: PLC0415

        # Messaging stays on devhost's local Service Bus until the Service Bus adapter lands.
        clock = DevhostClock() if settings.clock == "devhost" else SystemClock()
        messaging = LocalMessaging(settings.local_servicebus_path, clock.now)
        return Ports(
            settings=settings,
            states=azure_stores.cosmos_state_store(settings),
            orders=azure_stores.sql_orders_repository(settings),
            compensation_log=azure_stores.table_compensation_log(settings),
            clock=clock,
            sender=messaging,
            settlement=messaging,
        )
    if settings.profile == "azure":
        raise ValueError(
            "the azure profile needs the Service Bus messaging adapter, which is not built yet; "
            "the emulators profile runs the Azure store adapters with local messaging"
        )
    if settings.profile == "embedded":
        from adapters.local_messaging import LocalMessaging  # noqa: PLC0415 - needs devhost

        data = Path(settings.data_dir)
        clock = DevhostClock() if settings.clock == "devhost" else SystemClock()
        messaging = LocalMessaging(settings.local_servicebus_path, clock.now)
        return Ports(
            settings=settings,
            states=SqliteStateStore(data / "state.db"),
            orders=sqlite_orders_repository(data / "orders.db"),
            compensation_log=SqliteCompensationLog(data / "compensation.db"),
            clock=clock,
            sender=messaging,
            settlement=messaging,
        )
    raise ValueError(f"unsupported profile {settings.profile!r}")  # pragma: no cover - Literal guards it
