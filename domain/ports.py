"""Ports: what the services need from the outside world, as small Protocols.

Each has an embedded adapter (SQLite) and an Azure one (``adapters/``); ``tests/contract`` runs
one suite of assertions over every adapter of a port.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Protocol, runtime_checkable

from domain.compensation import CompensationEntry, CompensationOutcome
from domain.record import StateRecord
from domain.recovery_index import IndexEntry, IndexPage
from domain.states import ProcessState


@dataclass(frozen=True)
class Stored:
    """A record as read from the store, with the ETag a conditional replace must present."""

    record: StateRecord
    etag: str


@dataclass(frozen=True)
class Created:
    stored: Stored
    created: bool  # False: a record with that OrderID already existed and ``stored`` is it


@dataclass(frozen=True)
class Page:
    items: list[Stored]
    continuation: str | None
    # What the page cost the store: request units on Cosmos, rows examined on SQLite.
    cost: float


@dataclass(frozen=True)
class Slot:
    """One claim's place under the in-flight cap: ``holder`` is the attempt's instance ID, which
    becomes the record's ``LockedBy`` when the claim is written."""

    holder: str
    order_id: str
    at: datetime
    stale_before: datetime


class SlotOutcome(StrEnum):
    GRANTED = "granted"
    FULL = "full"  # every slot is held
    HELD = "held"  # another claimer of this same attempt holds its slot: that claimer wins


class StateStore(Protocol):
    def create_if_absent(self, record: StateRecord) -> Created: ...

    def get(self, order_id: str) -> Stored | None: ...

    def replace(self, record: StateRecord, etag: str) -> Stored:
        """Write ``record`` only if the stored ETag is still ``etag``.

        Raises ``PreconditionFailed`` if it is not, ``RecordNotFound`` if there is no record.
        """
        ...

    def query_claimable(self, now: datetime, limit: int) -> list[Stored]:
        """Pending, unlocked records whose NotBefore has passed, oldest first."""
        ...

    def query_expired(
        self,
        window_start: datetime,
        now: datetime,
        page_size: int,
        continuation: str | None = None,
    ) -> Page:
        """Processing/Compensating records with ``window_start <= CompleteBy < now``, by CompleteBy."""
        ...

    def count_in_states(self, states: frozenset[ProcessState]) -> int: ...

    def query_pending_notices(self, limit: int) -> list[Stored]:
        """Records whose ``NoticePending`` is set: the Supervisor's outbox. Its cost follows the
        notices pending (normally none), never the number of records."""
        ...

    def query_in_state(self, state: ProcessState, limit: int) -> list[Stored]:
        """Records in one state, by OrderID: for operators, not for any per-order path."""
        ...

    def acquire_slot(self, slot: Slot, *, limit: int, release: str | None = None) -> SlotOutcome:
        """Take one of ``limit`` in-flight slots for ``slot.holder``, atomically with every other
        claimer (C3's hard cap). ``release`` first frees the slot of an
        attempt that just ended, in the same write (a hand-over). When full, holders acquired
        before ``slot.stale_before`` whose record is no longer locked by them are freed first.
        So is ``slot.holder``'s own slot, full or not: a claimer of this attempt that died
        between its slot and its claim write must not keep every later claimer of the same
        attempt at ``HELD``, which nothing else would ever free below the cap."""
        ...

    def release_slot(self, holder: str) -> None:
        """Free ``holder``'s slot, if it holds one."""
        ...

    def slots_acquired(self) -> list[datetime]:
        """When each held slot was taken: the front end's drain rate (one read)."""
        ...


@dataclass(frozen=True)
class OrderLineRow:
    Sku: str
    Quantity: int
    UnitPrice: Decimal


@dataclass(frozen=True)
class OrderRow:
    """The application record in the orders database."""

    OrderID: str
    Customer: str
    Total: Decimal
    StatusQueue: str
    OrderHash: str
    Status: str
    Lines: tuple[OrderLineRow, ...]
    CreatedAt: datetime
    UpdatedAt: datetime


class InsertOutcome(StrEnum):
    CREATED = "created"
    EXISTS_MATCHING = "exists-matching"
    CONFLICT = "conflict"


class OrdersRepository(Protocol):
    def insert_if_absent(self, order: OrderRow) -> InsertOutcome:
        """Insert the order; an existing one with the same OrderHash is a match, else a conflict."""
        ...

    def get(self, order_id: str) -> OrderRow | None: ...

    def update_status(self, order_id: str, status: str, now: datetime, *, version: int) -> bool:
        """Set the status unless a write of a higher ``version`` (``status_version``) came first:
        in one conditional statement, so a stale writer cannot slip in between a check and the
        write. False when a newer status stays; raises ``RecordNotFound`` for an unknown order."""
        ...


class CompensationLog(Protocol):
    def append(self, entry: CompensationEntry) -> CompensationEntry:
        """Add the entry; a repeat for the same (OrderID, Step) returns the stored one unchanged."""
        ...

    def entries(self, order_id: str) -> list[CompensationEntry]:
        """Newest first: the order compensations run in."""
        ...

    def record_outcome(
        self,
        order_id: str,
        step: str,
        outcome: CompensationOutcome,
        now: datetime,
        error: str | None = None,
    ) -> CompensationEntry:
        """Raises ``RecordNotFound`` if there is no entry for that step."""
        ...


class Clock(Protocol):
    def now(self) -> datetime:
        """Timezone-aware UTC now."""
        ...


class MessageSender(Protocol):
    def send(
        self,
        queue: str,
        body: str,
        *,
        message_id: str,
        correlation_id: str | None = None,
        properties: dict[str, str] | None = None,
        scheduled_at: datetime | None = None,
    ) -> None:
        """Send one message. ``message_id`` is the broker's duplicate-detection key (E9);
        ``scheduled_at``: the message stays invisible until then (Service Bus scheduled messages)."""
        ...


@runtime_checkable
class QueueDepth(Protocol):
    def active_messages(self, queue: str) -> int:
        """Messages on ``queue`` that a receiver could take now (not locked, not scheduled)."""
        ...


class MessageSettlement(Protocol):
    def dead_letter(self, queue: str, lock_token: str, reason: str, description: str) -> None:
        """Dead-letter the message a trigger is processing, identified by its lock token."""
        ...


class LeaderLease(Protocol):
    """Leader election for singletons such as the Supervisor (R10): one holder at a time."""

    def acquire(self, holder: str) -> bool:
        """Take or renew the lease for ``holder``; False while someone else holds it."""
        ...

    def release(self, holder: str) -> None:
        """Give the lease up early (a clean shutdown), if ``holder`` has it."""
        ...


class RecoveryIndex(Protocol):
    """Where the Supervisor looks for expired locks on a large store (E14).

    Entries are partitioned by CompleteBy bucket, so a scan is one single-partition read per
    bucket between a persistent cursor and now, whatever the number of healthy records.
    """

    @property
    def bucket_size(self) -> timedelta: ...

    def add(self, order_id: str, complete_by: datetime) -> IndexEntry:
        """Upsert the entry; adding the same (OrderID, CompleteBy) again changes nothing."""
        ...

    def due(self, bucket: datetime, now: datetime, limit: int, continuation: str | None = None) -> IndexPage:
        """Entries of one bucket with ``CompleteBy < now``, by CompleteBy: one partition only.

        The continuation stays valid while entries of the bucket are removed.
        """
        ...

    def first_bucket(self, start: datetime, end: datetime) -> tuple[datetime | None, float]:
        """The oldest bucket from ``start`` to ``end`` (both included) holding any entry, due or
        not, and the store's cost: one small probe that skips a stretch of empty buckets."""
        ...

    def remove(self, entry: IndexEntry) -> float:
        """Delete the entry; a missing one is fine. Returns the store's cost of the delete."""
        ...

    def cursor(self) -> datetime | None:
        """The oldest bucket that may still hold entries; None while nothing has advanced it."""
        ...

    def advance_cursor(self, bucket: datetime) -> float:
        """Move the cursor forward to ``bucket`` (never back: a racing Supervisor's older
        value loses). Returns the store's cost."""
        ...


class CallerTokens(Protocol):
    """Verifies a caller's bearer token (adapters/entra_tokens.py): its claims once it is proven
    genuine and current, ``NotAuthenticated`` if not, ``DependencyUnavailable`` while the
    issuer's signing keys cannot be read."""

    def claims(self, token: str) -> Mapping[str, object]: ...
