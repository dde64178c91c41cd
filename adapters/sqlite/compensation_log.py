"""The embedded compensation log: ordered, durable entries in SQLite (R9, C4).

Row keys are ``<sequence:06d>:<step>``, the same sortable key the Table Storage adapter uses,
so "newest first" is a descending key order in both.
"""

import json
import sqlite3
from datetime import datetime
from pathlib import Path

from adapters.sqlite.db import SqliteDatabase
from domain.compensation import CompensationEntry, CompensationOutcome, next_outcome
from domain.errors import RecordNotFound
from domain.timestamps import format_optional, format_ts, parse_optional, parse_ts

SCHEMA = """
CREATE TABLE IF NOT EXISTS compensation_log (
    order_id    TEXT NOT NULL,
    row_key     TEXT NOT NULL,
    step        TEXT NOT NULL,
    sequence    INTEGER NOT NULL,
    action      TEXT NOT NULL,
    data        TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    outcome     TEXT,
    outcome_at  TEXT,
    error       TEXT,
    PRIMARY KEY (order_id, row_key),
    UNIQUE (order_id, step)
);
"""

_COLUMNS = "order_id, sequence, step, action, data, recorded_at, outcome, outcome_at, error"


def row_key(sequence: int, step: str) -> str:
    if not 0 <= sequence < 1_000_000:
        raise ValueError("sequence must be in [0, 999999] to keep row keys sortable")
    return f"{sequence:06d}:{step}"


def _entry(row: tuple[object, ...]) -> CompensationEntry:
    order_id, sequence, step, action, data, recorded_at, outcome, outcome_at, error = row
    return CompensationEntry(
        OrderID=str(order_id),
        Sequence=int(str(sequence)),
        Step=str(step),
        Action=str(action),
        Data=json.loads(str(data)),
        RecordedAt=parse_ts(str(recorded_at)),
        Outcome=None if outcome is None else CompensationOutcome(str(outcome)),
        OutcomeAt=parse_optional(None if outcome_at is None else str(outcome_at)),
        Error=None if error is None else str(error),
    )


def _select(conn: sqlite3.Connection, order_id: str, step: str) -> tuple[object, ...] | None:
    row: tuple[object, ...] | None = conn.execute(
        f"SELECT {_COLUMNS} FROM compensation_log WHERE order_id = ? AND step = ?",
        (order_id, step),
    ).fetchone()
    return row


class SqliteCompensationLog:
    def __init__(self, path: str | Path) -> None:
        # NORMAL, as the state store it goes with: safe against a killed process
        # (tests/contract/test_state_store_kill.py), not against a power cut.
        self._db = SqliteDatabase(path, SCHEMA, synchronous="NORMAL")

    def close(self) -> None:
        self._db.close()

    def append(self, entry: CompensationEntry) -> CompensationEntry:
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO compensation_log (row_key, " + _COLUMNS + ")"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    row_key(entry.Sequence, entry.Step),
                    entry.OrderID,
                    entry.Sequence,
                    entry.Step,
                    entry.Action,
                    json.dumps(entry.Data, sort_keys=True),
                    format_ts(entry.RecordedAt),
                    None if entry.Outcome is None else entry.Outcome.value,
                    format_optional(entry.OutcomeAt),
                    entry.Error,
                ),
            )
            row = _select(conn, entry.OrderID, entry.Step)
        assert row is not None  # inserted above or already there
        return _entry(row)

    def entries(self, order_id: str) -> list[CompensationEntry]:
        rows = (
            self._db.connection()
            .execute(
                f"SELECT {_COLUMNS} FROM compensation_log WHERE order_id = ? ORDER BY row_key DESC",
                (order_id,),
            )
            .fetchall()
        )
        return [_entry(row) for row in rows]

    def record_outcome(
        self,
        order_id: str,
        step: str,
        outcome: CompensationOutcome,
        now: datetime,
        error: str | None = None,
    ) -> CompensationEntry:
        with self._db.transaction() as conn:
            row = _select(conn, order_id, step)
            if row is None:
                raise RecordNotFound(f"no compensation entry for order {order_id} step {step}")
            current = _entry(row)
            if not next_outcome(current, outcome):
                return current
            conn.execute(
                "UPDATE compensation_log SET outcome = ?, outcome_at = ?, error = ?"
                " WHERE order_id = ? AND step = ?",
                (outcome.value, format_ts(now), error, order_id, step),
            )
            row = _select(conn, order_id, step)
        assert row is not None  # it existed inside this transaction
        return _entry(row)
