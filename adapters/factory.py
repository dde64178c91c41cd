"""The composition root: builds the adapters behind every port from the settings.

Function bodies, the agent and the operator tools all get their ports here, so switching a
profile is a settings change and nothing else.
"""

import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from adapters.clock import SystemClock
from adapters.resilience import RetryPolicy, guard
from adapters.sql_orders import sqlite_orders_repository
from adapters.sqlite_compensation_log import SqliteCompensationLog
from adapters.sqlite_lease import SqliteLeaderLease
from adapters.sqlite_state_store import SqliteStateStore
from domain.ports import (
    Clock,
    CompensationLog,
    LeaderLease,
    MessageSender,
    MessageSettlement,
    OrdersRepository,
    StateStore,
)
from services.context import Ports
from services.notifications import raise_alert
from services.outages import OutageMonitor
from services.settings import Settings

# Who holds the Supervisor's lease: unique per process, readable in logs.
INSTANCE_NAME = f"{socket.gethostname()}:{os.getpid()}"


class DevhostClock:
    """devhost's clock, so the app's CompleteBy and devhost's durable timers agree (tests run it virtual)."""

    def now(self) -> datetime:
        from devhost.clock import current_clock  # noqa: PLC0415 - embedded profile only

        return current_clock().now()


# The names operators see in alerts and logs ("the orders database is unavailable: ...").
ORDERS_DB = "orders database"
STATE_STORE = "state store"
RECOVERY_INDEX = "recovery index"
COMPENSATION_LOG = "compensation log"
SERVICE_BUS = "Service Bus"
LEASE_STORE = "lease store"


def retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(
        budget=settings.retry_budget_seconds,
        first_wait=settings.retry_first_wait_seconds,
        max_wait=settings.retry_max_wait_seconds,
    )


def _outage_alert(
    messaging: MessageSender, settings: Settings, clock: Clock
) -> Callable[[str, str, datetime], None]:
    def alert(dependency: str, reason: str, since: datetime) -> None:
        # Unguarded on purpose: when the bus is what is down, this fails once and is logged.
        raise_alert(
            messaging,
            queue=settings.alerts_queue,
            event="DependencyUnavailable",
            reason=reason,
            now=clock.now(),
            dedup_key=f"{dependency.replace(' ', '-')}.{since:%Y%m%dT%H%M}",
        )

    return alert


def _leader(settings: Settings, clock: Clock) -> LeaderLease:
    ttl = timedelta(seconds=settings.leader_lease_seconds)
    if settings.lease_storage_connection or settings.lease_storage_endpoint:
        from adapters import azure_stores  # noqa: PLC0415 - needs the Azure SDKs

        return azure_stores.blob_leader_lease(settings, ttl)
    return SqliteLeaderLease(Path(settings.data_dir) / "leases.db", "supervisor", ttl, clock)


def _with_recovery_index(
    settings: Settings, states: StateStore, shield: Callable[[str, Any], Any]
) -> StateStore:
    """With SAS_RECOVERY_INDEX, the Supervisor scans a recovery index instead of the records (E14)."""
    if not settings.recovery_index:
        return states
    from services.indexed_state_store import IndexedStateStore  # noqa: PLC0415 - only with the index

    if settings.profile in ("emulators", "azure"):
        from adapters import azure_stores  # noqa: PLC0415 - needs the Azure SDKs

        index = shield(RECOVERY_INDEX, lambda: azure_stores.cosmos_recovery_index(settings))
        return IndexedStateStore(states, index)
    from adapters.sqlite_recovery_index import SqliteRecoveryIndex  # noqa: PLC0415 - only with the index

    bucket = timedelta(minutes=settings.recovery_bucket_minutes)
    path = Path(settings.data_dir) / "recovery_index.db"
    index = shield(RECOVERY_INDEX, lambda: SqliteRecoveryIndex(path, bucket))
    return IndexedStateStore(states, index)


LOCAL_SERVICEBUS = "local"


class Messaging(MessageSender, MessageSettlement, Protocol):
    pass


def _messaging(settings: Settings, clock: Clock) -> Messaging:
    """devhost's local bus when ``ServiceBusConnection`` is "local", else Service Bus itself."""
    connection = settings.servicebus_connection
    if connection == LOCAL_SERVICEBUS or (settings.profile == "embedded" and not connection):
        if settings.profile == "azure":
            raise ValueError("the azure profile needs Service Bus: ServiceBusConnection cannot be 'local'")
        from adapters.local_messaging import LocalMessaging  # noqa: PLC0415 - needs devhost

        # The app's clock: under devhost's virtual clock, message times must be virtual too.
        return LocalMessaging(settings.local_servicebus_path, clock.now)
    from adapters import azure_stores  # noqa: PLC0415 - needs the Azure SDKs

    return azure_stores.servicebus_messaging(settings)


def build_ports(settings: Settings) -> Ports:
    """Every port behind the transient-fault policy (``adapters.resilience``): each call retries
    within ``SAS_RETRY_BUDGET_SECONDS``, then raises ``DependencyUnavailable``, and the first such
    failure of an outage alerts an operator once (``services.outages``)."""
    clock: Clock = DevhostClock() if settings.clock == "devhost" else SystemClock()
    policy = retry_policy(settings)
    messaging = _messaging(settings, clock)
    outages = OutageMonitor(clock, _outage_alert(messaging, settings, clock))

    def shield[T](dependency: str, build: Callable[[], T]) -> T:
        return guard(build, dependency, policy, outages)

    states: StateStore
    orders: OrdersRepository
    compensation_log: CompensationLog
    if settings.profile in ("emulators", "azure"):
        from adapters import azure_stores  # noqa: PLC0415 - needs the Azure SDKs and pyodbc

        states = shield(STATE_STORE, lambda: azure_stores.cosmos_state_store(settings))
        orders = shield(ORDERS_DB, lambda: azure_stores.sql_orders_repository(settings))
        compensation_log = shield(COMPENSATION_LOG, lambda: azure_stores.table_compensation_log(settings))
    else:
        data = Path(settings.data_dir)
        states = shield(STATE_STORE, lambda: SqliteStateStore(data / "state.db"))
        orders = shield(ORDERS_DB, lambda: sqlite_orders_repository(data / "orders.db"))
        compensation_log = shield(COMPENSATION_LOG, lambda: SqliteCompensationLog(data / "compensation.db"))
    sender: MessageSender = guard(lambda: messaging, SERVICE_BUS, policy, outages)
    return Ports(
        settings=settings,
        states=_with_recovery_index(settings, states, shield),
        orders=orders,
        compensation_log=compensation_log,
        clock=clock,
        sender=sender,
        settlement=messaging,
        leader=shield(LEASE_STORE, lambda: _leader(settings, clock)),
        instance_name=INSTANCE_NAME,
        outages=outages,
    )
