"""What a profile provides: a builder for each store behind a port.

``adapters.embedded_profile`` (SQLite files) and ``adapters.azure_profile`` (Cosmos DB, SQL,
Table Storage; the emulators and azure profiles) each return one ``StoreBuilders``; the
composition root (``bootstrap``) wraps every builder in the transient-fault policy.
Builders, not built stores: a store is built on its first call, inside the retries, so a
dependency that is down at start-up is an outage like any other.
"""

from collections.abc import Callable
from dataclasses import dataclass

from domain.ports import CompensationLog, OrdersRepository, RecoveryIndex, StateStore


@dataclass(frozen=True)
class StoreBuilders:
    states: Callable[[], StateStore]
    orders: Callable[[], OrdersRepository]
    compensation_log: Callable[[], CompensationLog]
    recovery_index: Callable[[], RecoveryIndex]
