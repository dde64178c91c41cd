"""The effects ledger in SQLite: every call with its outcome, and at most one effect per key.

Tests read it as the judge of what the remote service really did, whatever the client saw.
Times are fixed-width UTC strings, so text order is time order and MIN/MAX work in SQL.
"""

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

from domain.timestamps import format_ts

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL,
    operation TEXT NOT NULL,
    at TEXT NOT NULL,
    outcome TEXT NOT NULL,
    body TEXT
);
CREATE INDEX IF NOT EXISTS calls_by_key ON calls (key, id);
CREATE TABLE IF NOT EXISTS effects (
    key TEXT PRIMARY KEY,
    operation TEXT NOT NULL,
    result TEXT NOT NULL,
    at TEXT NOT NULL,
    -- How many times the effect was applied: 1 for a correct service; more only under the
    -- broken_idempotency fault, which exists so that the judges can be shown to catch it.
    applied INTEGER NOT NULL DEFAULT 1
);
"""


class Ledger:
    """One connection in autocommit mode; each method is one short statement or two."""

    def __init__(self, path: Path | str) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL survives a killed process without fsync on every commit; the ledger is test data.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def record_call(self, key: str, operation: str, at: datetime, body: object = None) -> int:
        text = None if body is None else json.dumps(body, sort_keys=True)
        cursor = self._db.execute(
            "INSERT INTO calls (key, operation, at, outcome, body) VALUES (?, ?, ?, 'started', ?)",
            (key, operation, format_ts(at), text),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def set_outcome(self, call_id: int, outcome: str) -> None:
        self._db.execute("UPDATE calls SET outcome = ? WHERE id = ?", (outcome, call_id))

    def effect(self, key: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT result FROM effects WHERE key = ?", (key,)).fetchone()
        return None if row is None else _result(row[0])

    def apply_effect(
        self, key: str, operation: str, result: dict[str, Any], at: datetime
    ) -> tuple[dict[str, Any], bool]:
        """Store the effect unless one exists; returns the stored result and whether this call stored it.

        The conflict clause, not a read-then-write, is what makes racing calls (even from other
        processes on the same file) apply exactly one effect.
        """
        cursor = self._db.execute(
            "INSERT INTO effects (key, operation, result, at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (key) DO NOTHING",
            (key, operation, json.dumps(result, sort_keys=True), format_ts(at)),
        )
        stored = self.effect(key)
        assert stored is not None
        return stored, cursor.rowcount == 1

    def apply_again(self, key: str) -> None:
        """The broken_idempotency fault: a replay applies the effect once more."""
        self._db.execute("UPDATE effects SET applied = applied + 1 WHERE key = ?", (key,))

    def history(self, key: str) -> dict[str, Any]:
        calls = self._db.execute(
            "SELECT at, operation, outcome, body FROM calls WHERE key = ? ORDER BY id", (key,)
        ).fetchall()
        effects = self._db.execute(
            "SELECT at, operation, result FROM effects WHERE key = ?", (key,)
        ).fetchall()
        return {
            "key": key,
            "calls": [
                {"at": at, "operation": op, "outcome": outcome, "body": _body(body)}
                for at, op, outcome, body in calls
            ],
            "effects": [{"at": at, "operation": op, "result": _result(result)} for at, op, result in effects],
        }

    def summary(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        match = "substr(key, 1, ?) = ?"
        keys: dict[str, dict[str, Any]] = {}
        for key, count, first, last in self._db.execute(
            f"SELECT key, COUNT(*), MIN(at), MAX(at) FROM calls WHERE {match} GROUP BY key",
            (len(prefix), prefix),
        ):
            keys[key] = {"calls": count, "effects": 0, "first_call": first, "last_call": last}
        for key, count in self._db.execute(
            f"SELECT key, SUM(applied) FROM effects WHERE {match} GROUP BY key", (len(prefix), prefix)
        ):
            entry = keys.setdefault(key, {"calls": 0, "effects": 0, "first_call": None, "last_call": None})
            entry["effects"] = count
        return dict(sorted(keys.items()))


def _body(text: str | None) -> object:
    return None if text is None else json.loads(text)


def _result(text: str) -> dict[str, Any]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value
