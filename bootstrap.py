"""The composition root: builds the adapters behind every port from the settings.

It sits above the layers it joins, beside ``function_app.py``: it imports ``services`` and
``adapters``, so that neither has to import the other.

Function bodies and the operator tools get their ports here, so switching a profile is a
settings change and nothing else. Each profile's stores come from its own module
(``embedded_profile``, ``azure_profile``); this module adds what every profile shares: the
transient-fault policy around each port, the outage alerts, messaging and the lease.
"""

import os
import socket
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

from adapters.entra_tokens import EntraTokens
from adapters.profiles import StoreBuilders
from adapters.resilience import RetryPolicy, guard
from adapters.sqlite.lease import SqliteLeaderLease
from domain.dependencies import (
    COMPENSATION_LOG,
    LEASE_STORE,
    ORDERS_DB,
    RECOVERY_INDEX,
    SERVICE_BUS,
    STATE_STORE,
)
from domain.ports import (
    Clock,
    LeaderLease,
    MessageSender,
    MessageSettlement,
    QueueDepth,
    StateStore,
)
from services.admission import Admission
from services.context import Ports
from services.indexed_state_store import IndexedStateStore
from services.notifications import raise_alert
from services.outages import OutageMonitor
from settings import Settings, SettingsError

# Who holds the Supervisor's lease: unique per process, readable in logs.
INSTANCE_NAME = f"{socket.gethostname()}:{os.getpid()}"


# The names operators see in alerts and logs ("the orders database is unavailable: ...").


def silent(dependency: str, reason: str, since: datetime) -> None:
    """No note: the caller reports the outage itself."""
    del dependency, reason, since


def retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(
        budget=settings.retry_budget_seconds,
        first_wait=settings.retry_first_wait_seconds,
        max_wait=settings.retry_max_wait_seconds,
    )


def _outage_alert(
    messaging: MessageSender, settings: Settings, clock: Clock, event: str
) -> Callable[[str, str, datetime], None]:
    def alert(dependency: str, reason: str, since: datetime) -> None:
        # Unguarded on purpose: when the bus is what is down, this fails once and is logged.
        raise_alert(
            messaging,
            queue=settings.alerts_queue,
            event=event,
            reason=reason,
            now=clock.now(),
            dedup_key=f"{dependency.replace(' ', '-')}.{since:%Y%m%dT%H%M}",
        )

    return alert


def _leader(settings: Settings, clock: Clock) -> LeaderLease:
    ttl = timedelta(seconds=settings.leader_lease_seconds)
    if settings.lease_storage_connection or settings.lease_storage_endpoint:
        from adapters import azure_profile  # noqa: PLC0415 - needs the Azure SDKs

        return azure_profile.blob_leader_lease(settings, ttl)
    return SqliteLeaderLease(Path(settings.data_dir) / "leases.db", "supervisor", ttl, clock)


def _store_builders(settings: Settings) -> StoreBuilders:
    if settings.profile in ("emulators", "azure"):
        from adapters import azure_profile  # noqa: PLC0415 - needs the Azure SDKs and pyodbc

        return azure_profile.store_builders(settings)
    from adapters import embedded_profile  # noqa: PLC0415 - one profile per process

    return embedded_profile.store_builders(settings)


def create_orders_schema(settings: Settings) -> list[str]:
    """Create or migrate the orders database's schema (``python -m ops schema``); what changed."""
    if settings.profile in ("emulators", "azure"):
        from adapters import azure_profile  # noqa: PLC0415 - needs the Azure SDKs and pyodbc

        return azure_profile.create_orders_schema(settings)
    from adapters import embedded_profile  # noqa: PLC0415 - one profile per process

    return embedded_profile.create_orders_schema(settings)


class Messaging(MessageSender, MessageSettlement, Protocol):
    pass


def _messaging(settings: Settings, clock: Clock) -> Messaging:
    """The local bus when ``ServiceBusConnection`` is "local", else Service Bus itself."""
    if settings.uses_local_bus:
        if settings.profile == "azure":
            raise SettingsError("the azure profile needs Service Bus: ServiceBusConnection cannot be 'local'")
        from adapters.servicebus.local_messaging import LocalMessaging  # noqa: PLC0415 - local only

        # The app's clock: under a host's virtual clock, message times must be virtual too.
        return LocalMessaging(settings.local_servicebus_path, clock.now)
    from adapters import azure_profile  # noqa: PLC0415 - needs the Azure SDKs

    return azure_profile.servicebus_messaging(settings)


def _queue_depth(settings: Settings, messaging: Messaging) -> QueueDepth | None:
    if isinstance(messaging, QueueDepth):
        return messaging  # the local bus counts its own file
    from adapters import azure_profile  # noqa: PLC0415 - needs the Azure SDKs

    return azure_profile.queue_depth(settings)


def quiet_outages(clock: Clock) -> OutageMonitor:
    """The outage monitor of an operator's tool: it knows what is down, and tells no one."""
    return OutageMonitor(clock, silent)


def build_ports(settings: Settings, clock: Clock, *, notes: bool = True) -> Ports:
    """Every port behind the transient-fault policy (``adapters.resilience``): each call retries
    within ``SAS_RETRY_BUDGET_SECONDS``, then raises ``DependencyUnavailable``; the first such
    failure of an outage alerts an operator once, and its end sends one ``DependencyRecovered``
    note (``services.outages``). ``clock``: the system clock, or the host's
    (``adapters.clock.host_clock``). ``notes=False``: the operator's tools, which report an
    outage in their own output and exit code; an alert from them would be one more per look,
    never followed by its recovered note (issue 37)."""
    policy = retry_policy(settings)
    messaging = _messaging(settings, clock)
    outages = (
        OutageMonitor(
            clock,
            _outage_alert(messaging, settings, clock, "DependencyUnavailable"),
            _outage_alert(messaging, settings, clock, "DependencyRecovered"),
        )
        if notes
        else quiet_outages(clock)
    )

    def shield[T](dependency: str, build: Callable[[], T]) -> T:
        return guard(build, dependency, policy, outages)

    stores = _store_builders(settings)
    states: StateStore = shield(STATE_STORE, stores.states)
    if settings.recovery_index:
        # The Supervisor scans a recovery index instead of the records (E14).
        states = IndexedStateStore(states, shield(RECOVERY_INDEX, stores.recovery_index))
    sender: MessageSender = guard(lambda: messaging, SERVICE_BUS, policy, outages)
    # Unguarded: a count that cannot be read must not hold a POST for a whole retry budget;
    # Admission keeps the last count it read instead.
    admission = Admission(
        states,
        _queue_depth(settings, messaging),
        clock,
        queue=settings.orders_queue,
        cache=timedelta(seconds=settings.queue_depth_cache_seconds),
    )
    return Ports(
        settings=settings,
        states=states,
        orders=shield(ORDERS_DB, stores.orders),
        compensation_log=shield(COMPENSATION_LOG, stores.compensation_log),
        clock=clock,
        sender=sender,
        settlement=messaging,
        leader=shield(LEASE_STORE, lambda: _leader(settings, clock)),
        instance_name=INSTANCE_NAME,
        outages=outages,
        admission=admission,
        tokens=_tokens(settings, clock),
    )


def _tokens(settings: Settings, clock: Clock) -> EntraTokens | None:
    if settings.auth_tenant_id is None or settings.auth_audience is None:
        return None
    return EntraTokens(
        settings.auth_authority,
        settings.auth_tenant_id,
        settings.auth_audience,
        clock,
        timeout=settings.call_timeout_seconds,
    )
