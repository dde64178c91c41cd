"""The embedded state store: state records in SQLite with real ETag semantics.

Every write gets a new ETag; ``replace`` is one ``UPDATE ... WHERE etag = ?`` statement, so of
any number of threads or processes presenting the same ETag exactly one wins, as with
Cosmos DB's If-Match. The columns beside the JSON body exist only for the two indexed
queries: the Supervisor's expired window and the starter's claimable list.

``synchronous=NORMAL`` (WAL): every claim, step and slot writes this one file, and FULL's fsync
inside the write lock was what the worker processes waited on in a burst (docs/capacity.md,
"Past the cap"). A commit still survives the process being killed
(tests/contract/test_state_store_kill.py); only a power cut may undo the last commits, as it may
on the local bus and devhost's task hub beside it.
"""

import json
import sqlite3
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from adapters.sqlite.db import SqliteDatabase, decode_token, encode_token
from domain.errors import PreconditionFailed, RecordNotFound
from domain.ports import Created, Page, Slot, SlotOutcome, Stored
from domain.record import StateRecord, from_document, to_document
from domain.states import ProcessState
from domain.timestamps import format_ts, parse_ts

SCHEMA = """
CREATE TABLE IF NOT EXISTS state_records (
    order_id      TEXT PRIMARY KEY,
    etag          TEXT NOT NULL,
    process_state TEXT NOT NULL,
    locked_by     TEXT,
    complete_by   TEXT,
    not_before    TEXT,
    created_at    TEXT NOT NULL,
    doc           TEXT NOT NULL
);
-- The Supervisor's window: only locked records have a CompleteBy, so healthy finished or
-- waiting records are not in this index at all and cost the scan nothing.
CREATE INDEX IF NOT EXISTS ix_state_expiry
    ON state_records (complete_by, order_id) WHERE complete_by IS NOT NULL;
CREATE INDEX IF NOT EXISTS ix_state_claimable
    ON state_records (created_at, order_id) WHERE process_state = 'Pending';
CREATE INDEX IF NOT EXISTS ix_state_process_state ON state_records (process_state);
-- The Supervisor's outbox: a partial index on the document, so no column (and no migration).
CREATE INDEX IF NOT EXISTS ix_state_notice_pending
    ON state_records (order_id) WHERE json_extract(doc, '$.NoticePending') = 1;
-- The in-flight cap's slots (C3): one row per attempt holding one; counted and taken in one
-- write transaction, so concurrent claimers never read the same count.
CREATE TABLE IF NOT EXISTS in_flight_slots (
    holder      TEXT PRIMARY KEY,
    order_id    TEXT NOT NULL,
    acquired_at TEXT NOT NULL
);
"""

_LOCKED = (ProcessState.PROCESSING.value, ProcessState.COMPENSATING.value)


def _new_etag() -> str:
    return f'"{uuid.uuid4()}"'


def _columns(record: StateRecord) -> tuple[Any, ...]:
    doc = to_document(record)
    return (
        doc["ProcessState"],
        doc["LockedBy"],
        doc["CompleteBy"],
        doc["NotBefore"],
        doc["CreatedAt"],
        json.dumps(doc, separators=(",", ":")),
    )


class SqliteStateStore:
    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL") -> None:
        """``synchronous``: FULL only for harness.bench.sqlite_writers, which measures what NORMAL saves."""
        self._db = SqliteDatabase(path, SCHEMA, synchronous=synchronous)

    @property
    def database(self) -> SqliteDatabase:
        """The underlying database, for diagnostics and benchmarks (counting SQLite's work)."""
        return self._db

    def close(self) -> None:
        self._db.close()

    def create_if_absent(self, record: StateRecord) -> Created:
        etag = _new_etag()
        with self._db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO state_records (order_id, etag, process_state, locked_by,"
                " complete_by, not_before, created_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (order_id) DO NOTHING",
                (record.OrderID, etag, *_columns(record)),
            )
            if cursor.rowcount == 1:
                return Created(Stored(record, etag), created=True)
            row = conn.execute(
                "SELECT etag, doc FROM state_records WHERE order_id = ?", (record.OrderID,)
            ).fetchone()
        return Created(Stored(from_document(json.loads(row[1])), row[0]), created=False)

    def get(self, order_id: str) -> Stored | None:
        row = (
            self._db.connection()
            .execute("SELECT etag, doc FROM state_records WHERE order_id = ?", (order_id,))
            .fetchone()
        )
        return None if row is None else Stored(from_document(json.loads(row[1])), row[0])

    def replace(self, record: StateRecord, etag: str) -> Stored:
        new_etag = _new_etag()
        state, locked_by, complete_by, not_before, _created, doc = _columns(record)
        conn = self._db.connection()
        cursor = conn.execute(
            "UPDATE state_records SET etag = ?, process_state = ?, locked_by = ?,"
            " complete_by = ?, not_before = ?, doc = ? WHERE order_id = ? AND etag = ?",
            (new_etag, state, locked_by, complete_by, not_before, doc, record.OrderID, etag),
        )
        if cursor.rowcount == 1:
            return Stored(record, new_etag)
        exists = conn.execute("SELECT 1 FROM state_records WHERE order_id = ?", (record.OrderID,)).fetchone()
        if exists is None:
            raise RecordNotFound(f"no state record for order {record.OrderID}")
        raise PreconditionFailed(f"state record {record.OrderID} changed since ETag {etag}")

    def query_claimable(self, now: datetime, limit: int) -> list[Stored]:
        rows = (
            self._db.connection()
            .execute(
                "SELECT etag, doc FROM state_records INDEXED BY ix_state_claimable"
                " WHERE process_state = 'Pending'"
                " AND locked_by IS NULL AND (not_before IS NULL OR not_before <= ?)"
                " ORDER BY created_at, order_id LIMIT ?",
                (format_ts(now), limit),
            )
            .fetchall()
        )
        return [Stored(from_document(json.loads(doc)), etag) for etag, doc in rows]

    def query_expired(
        self,
        window_start: datetime,
        now: datetime,
        page_size: int,
        continuation: str | None = None,
    ) -> Page:
        # Keyset paging on (complete_by, order_id): a token stays valid while records change.
        after = decode_token(continuation) if continuation else ("", "")
        rows = (
            self._db.connection()
            .execute(
                # INDEXED BY: without statistics the planner prefers the process_state index,
                # which walks every healthy Processing record (tests/contract catches that).
                "SELECT etag, doc, complete_by, order_id FROM state_records INDEXED BY ix_state_expiry"
                " WHERE complete_by >= ? AND complete_by < ?"
                " AND process_state IN (?, ?)"
                " AND (complete_by, order_id) > (?, ?)"
                " ORDER BY complete_by, order_id LIMIT ?",
                (format_ts(window_start), format_ts(now), *_LOCKED, *after, page_size + 1),
            )
            .fetchall()
        )
        more = len(rows) > page_size
        rows = rows[:page_size]
        items = [Stored(from_document(json.loads(doc)), etag) for etag, doc, _, _ in rows]
        token = encode_token(rows[-1][2], rows[-1][3]) if more else None
        # One read for the page plus one per row: the rows the index range handed back.
        return Page(items=items, continuation=token, cost=float(1 + len(rows)))

    def query_pending_notices(self, limit: int) -> list[Stored]:
        rows = (
            self._db.connection()
            .execute(
                "SELECT etag, doc FROM state_records INDEXED BY ix_state_notice_pending"
                " WHERE json_extract(doc, '$.NoticePending') = 1 ORDER BY order_id LIMIT ?",
                (limit,),
            )
            .fetchall()
        )
        return [Stored(from_document(json.loads(doc)), etag) for etag, doc in rows]

    def query_in_state(self, state: ProcessState, limit: int) -> list[Stored]:
        rows = (
            self._db.connection()
            .execute(
                "SELECT etag, doc FROM state_records WHERE process_state = ? ORDER BY order_id LIMIT ?",
                (state.value, limit),
            )
            .fetchall()
        )
        return [Stored(from_document(json.loads(doc)), etag) for etag, doc in rows]

    def count_in_states(self, states: frozenset[ProcessState]) -> int:
        if not states:
            return 0
        marks = ", ".join("?" for _ in states)
        row = (
            self._db.connection()
            .execute(
                f"SELECT COUNT(*) FROM state_records WHERE process_state IN ({marks})",
                tuple(s.value for s in states),
            )
            .fetchone()
        )
        return int(row[0])

    def acquire_slot(self, slot: Slot, *, limit: int, release: str | None = None) -> SlotOutcome:
        # BEGIN IMMEDIATE takes the write lock before the count: the count and the insert are
        # one serialised step across threads and processes.
        with self._db.transaction() as conn:
            if release is not None:
                conn.execute("DELETE FROM in_flight_slots WHERE holder = ?", (release,))
            # A record locked without a slot (written before this table, or by an operator's tool)
            # still counts: it is adopted, in the same transaction (an index range of locked rows).
            conn.execute(
                "INSERT INTO in_flight_slots (holder, order_id, acquired_at)"
                " SELECT locked_by, order_id, ? FROM state_records"
                " WHERE process_state IN (?, ?) AND locked_by IS NOT NULL"
                " AND locked_by NOT IN (SELECT holder FROM in_flight_slots)"
                " ON CONFLICT (holder) DO NOTHING",
                (format_ts(slot.at), *_LOCKED),
            )
            # This attempt's own slot, left by a claimer that died before its claim write: taken
            # over once stale (StateStore.acquire_slot), or the attempt is never claimed again.
            conn.execute(
                "DELETE FROM in_flight_slots WHERE holder = ? AND acquired_at < ? AND holder NOT IN"
                " (SELECT locked_by FROM state_records WHERE locked_by IS NOT NULL"
                " AND process_state IN (?, ?))",
                (slot.holder, format_ts(slot.stale_before), *_LOCKED),
            )
            if conn.execute("SELECT 1 FROM in_flight_slots WHERE holder = ?", (slot.holder,)).fetchone():
                return SlotOutcome.HELD
            if _held(conn) >= limit:
                conn.execute(
                    "DELETE FROM in_flight_slots WHERE acquired_at < ? AND holder NOT IN"
                    " (SELECT locked_by FROM state_records WHERE locked_by IS NOT NULL"
                    " AND process_state IN (?, ?))",
                    (format_ts(slot.stale_before), *_LOCKED),
                )
                if _held(conn) >= limit:
                    return SlotOutcome.FULL
            conn.execute(
                "INSERT INTO in_flight_slots (holder, order_id, acquired_at) VALUES (?, ?, ?)",
                (slot.holder, slot.order_id, format_ts(slot.at)),
            )
        return SlotOutcome.GRANTED

    def release_slot(self, holder: str) -> None:
        self._db.connection().execute("DELETE FROM in_flight_slots WHERE holder = ?", (holder,))

    def slots_acquired(self) -> list[datetime]:
        rows = self._db.connection().execute("SELECT acquired_at FROM in_flight_slots").fetchall()
        return [parse_ts(at) for (at,) in rows]


def _held(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM in_flight_slots").fetchone()[0])
