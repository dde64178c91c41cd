"""A state store whose expired-lock scan reads the recovery index instead of the records (E14).

Writes: a record that carries a CompleteBy gets its index entry written FIRST, then the record.
A crash in between leaves an entry whose record never got that CompleteBy (stale, dropped by
the next scan), never a locked record without an entry.

Scan (``query_expired``): from the index's cursor up to the bucket of ``now``, probe for the
next bucket that holds any entry (one small query skips any stretch of empty buckets), read its
due entries (a single-partition read), and point-read each entry's record; keep the records
still locked with exactly that CompleteBy, and remove every other entry. The records stay the
truth: the Supervisor's recovery is still the conditional replace on the ETag read here, so two
Supervisors racing stay correct, and a recovered record's old entry is dropped as stale by the
next scan. A scan's cost follows the entries that came due since the cursor, not the number of
records in the store.

The lower bound is the cursor, not ``window_start``: the cursor is "the oldest bucket that may
still hold entries", so a Supervisor that was down for longer than its lookback still finds
everything that expired meanwhile. ``window_start`` only places the cursor of a new index.
Records locked before the index existed have no entry: enable the index on a store with no
locked records (no backfill tool exists yet).

The cursor stops at the oldest bucket with expired work, and never passes the bucket before
the bucket of ``now``: a writer whose clock lags the Supervisor's, or whose entry write is
delayed, by less than one bucket plus its CompleteBy grace still lands in a bucket the scan reads.
The same grace bounds the other race: a record write that lands more than its grace after its
entry could find the entry already removed as stale, leaving that lock unindexed.
"""

import base64
import json
from dataclasses import dataclass, replace
from datetime import datetime

from domain.ports import Created, Page, RecoveryIndex, Slot, SlotOutcome, StateStore, Stored
from domain.record import StateRecord
from domain.recovery_index import IndexEntry, recovery_bucket
from domain.states import LOCKED_STATES, ProcessState
from domain.timestamps import format_ts, parse_ts

# A point read of a small document: 1 RU on Cosmos (up to 1 KB), one row on SQLite. The
# StateStore port reports no cost for ``get``, so the scan counts it at this nominal price.
POINT_READ_COST = 1.0
# One call reads at most this many buckets (a day of 5-minute ones) and then hands back a
# continuation, so catching up after a long outage is many bounded calls, not one long one.
MAX_BUCKETS_PER_CALL = 288


@dataclass(frozen=True)
class _Position:
    bucket: datetime
    token: str | None  # the index's continuation within ``bucket``
    live: bool  # this bucket held a live entry
    advancing: bool  # no bucket before this one held a live entry: the cursor may follow
    cursor: datetime | None  # the cursor as this scan last read or wrote it


def _encode(position: _Position) -> str:
    data = [
        format_ts(position.bucket),
        position.token,
        position.live,
        position.advancing,
        None if position.cursor is None else format_ts(position.cursor),
    ]
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode()


def _decode(token: str) -> _Position:
    try:
        bucket, inner, live, advancing, cursor = json.loads(base64.urlsafe_b64decode(token.encode()))
        return _Position(
            bucket=parse_ts(str(bucket)),
            token=None if inner is None else str(inner),
            live=bool(live),
            advancing=bool(advancing),
            cursor=None if cursor is None else parse_ts(str(cursor)),
        )
    except (ValueError, TypeError) as error:
        raise ValueError(f"invalid continuation token {token!r:.60}") from error


def is_live(stored: Stored | None, entry: IndexEntry, now: datetime) -> bool:
    """Whether the entry still describes its record: locked, with this CompleteBy, expired."""
    if stored is None:
        return False
    record = stored.record
    return (
        record.ProcessState in LOCKED_STATES
        and record.CompleteBy is not None
        and record.CompleteBy == entry.CompleteBy
        and record.CompleteBy < now
    )


class IndexedStateStore:
    def __init__(
        self, states: StateStore, index: RecoveryIndex, *, max_buckets_per_call: int = MAX_BUCKETS_PER_CALL
    ) -> None:
        if max_buckets_per_call < 1:
            raise ValueError("max_buckets_per_call must be at least 1")
        self._states = states
        self._index = index
        self._max_buckets = max_buckets_per_call

    @property
    def states(self) -> StateStore:
        return self._states

    @property
    def index(self) -> RecoveryIndex:
        return self._index

    def close(self) -> None:
        for part in (self._states, self._index):
            close = getattr(part, "close", None)
            if close is not None:
                close()

    def _index_first(self, record: StateRecord) -> None:
        if record.CompleteBy is not None:
            self._index.add(record.OrderID, record.CompleteBy)

    def create_if_absent(self, record: StateRecord) -> Created:
        self._index_first(record)
        return self._states.create_if_absent(record)

    def get(self, order_id: str) -> Stored | None:
        return self._states.get(order_id)

    def replace(self, record: StateRecord, etag: str) -> Stored:
        self._index_first(record)
        return self._states.replace(record, etag)

    def query_claimable(self, now: datetime, limit: int) -> list[Stored]:
        return self._states.query_claimable(now, limit)

    def count_in_states(self, states: frozenset[ProcessState]) -> int:
        return self._states.count_in_states(states)

    def query_pending_notices(self, limit: int) -> list[Stored]:
        return self._states.query_pending_notices(limit)

    def query_in_state(self, state: ProcessState, limit: int) -> list[Stored]:
        return self._states.query_in_state(state, limit)

    def acquire_slot(self, slot: Slot, *, limit: int, release: str | None = None) -> SlotOutcome:
        return self._states.acquire_slot(slot, limit=limit, release=release)

    def release_slot(self, holder: str) -> None:
        self._states.release_slot(holder)

    def slots_acquired(self) -> list[datetime]:
        return self._states.slots_acquired()

    def query_expired(
        self,
        window_start: datetime,
        now: datetime,
        page_size: int,
        continuation: str | None = None,
    ) -> Page:
        size = self._index.bucket_size
        last = recovery_bucket(now, size)
        # The cursor never passes this: a bucket that ended a whole bucket ago gets no more
        # entries from a writer that is on time.
        settled = last - size
        cost = 0.0
        if continuation:
            position = _decode(continuation)
        else:
            cursor = self._index.cursor()
            cost += POINT_READ_COST
            start = cursor if cursor is not None else recovery_bucket(window_start, size)
            position = _Position(start, None, live=False, advancing=True, cursor=cursor)
        items: list[Stored] = []
        buckets = 0
        while position.bucket <= last and len(items) < page_size and buckets < self._max_buckets:
            if position.token is None:
                found, probe_cost = self._index.first_bucket(position.bucket, last)
                cost += probe_cost
                # Every bucket skipped here holds no entry at all.
                position = replace(position, bucket=last + size if found is None else found)
                if found is None:
                    break
            page = self._index.due(position.bucket, now, page_size - len(items), position.token)
            cost += page.cost
            live = position.live
            for entry in page.entries:
                stored = self._states.get(entry.OrderID)
                cost += POINT_READ_COST
                if is_live(stored, entry, now):
                    assert stored is not None
                    items.append(stored)
                    live = True
                else:
                    cost += self._index.remove(entry)
            if live and position.advancing:
                # The oldest bucket with expired work: the cursor stops here until it is recovered.
                position, advance_cost = self._advance(position, min(position.bucket, settled))
                cost += advance_cost
                position = replace(position, advancing=False)
            if page.continuation is not None:
                position = replace(position, token=page.continuation, live=live)
                continue
            buckets += 1
            position = replace(position, bucket=position.bucket + size, token=None, live=False)
        if position.advancing:
            position, advance_cost = self._advance(position, min(position.bucket, settled))
            cost += advance_cost
        token = _encode(position) if position.bucket <= last else None
        return Page(items=items, continuation=token, cost=cost)

    def _advance(self, position: _Position, target: datetime) -> tuple[_Position, float]:
        if position.cursor is not None and target <= position.cursor:
            return position, 0.0
        return replace(position, cursor=target), self._index.advance_cursor(target)
