"""Everything a function body needs, built once per process by the composition root."""

from dataclasses import dataclass, field

from domain.ports import (
    CallerTokens,
    Clock,
    CompensationLog,
    LeaderLease,
    MessageSender,
    MessageSettlement,
    OrderRow,
    OrdersRepository,
    StateStore,
)
from services.admission import Admission
from services.outages import OutageMonitor
from services.record_cache import LruCache, RecordCache
from settings import Settings


@dataclass(frozen=True)
class Ports:
    settings: Settings
    states: StateStore
    orders: OrdersRepository
    compensation_log: CompensationLog
    clock: Clock
    sender: MessageSender
    settlement: MessageSettlement
    # Only the holder of this lease runs the Supervisor (R10); ``instance_name`` names this process.
    leader: LeaderLease
    instance_name: str
    # What this process last read or wrote of each record: fenced writes start from it.
    records: RecordCache = field(default_factory=RecordCache)
    # Orders this process read from SQL: immutable, so the activities of an attempt read once.
    orders_read: LruCache[OrderRow] = field(default_factory=LruCache)
    # Which dependencies are down now; one alert per outage (docs/operating.md "Transient faults").
    outages: OutageMonitor | None = None
    # The front end's backlog (C3): the orders queue and the Pending records, cached briefly.
    admission: Admission | None = None
    # Verifies callers' bearer tokens (E16); None when the validator's settings are missing, and
    # then the front end refuses every request.
    tokens: CallerTokens | None = None

    def close(self) -> None:
        """Release what the adapters hold (connections, open files), for a host that unloads the
        app and keeps running, as tests do; a Functions worker process simply exits."""
        for port in (self.states, self.orders, self.compensation_log, self.settlement, self.leader):
            close = getattr(port, "close", None)
            if callable(close):
                close()
