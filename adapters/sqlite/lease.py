"""Leader election for the embedded profile: a lease row in SQLite, taken with a conditional write.

Safe across processes on one machine (the file's write lock serialises contenders); the lease
expires ``ttl`` after the last acquire, so a dead leader is replaced (R11).
"""

from datetime import timedelta
from pathlib import Path

from adapters.sqlite.db import SqliteDatabase
from domain.ports import Clock
from domain.timestamps import format_ts

SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
"""


class SqliteLeaderLease:
    def __init__(self, path: str | Path, name: str, ttl: timedelta, clock: Clock) -> None:
        self._db = SqliteDatabase(path, SCHEMA)
        self._name = name
        self._ttl = ttl
        self._clock = clock

    def acquire(self, holder: str) -> bool:
        now = self._clock.now()
        with self._db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at"
                " WHERE leases.holder = excluded.holder OR leases.expires_at <= ?",
                (self._name, holder, format_ts(now + self._ttl), format_ts(now)),
            )
            return cursor.rowcount == 1

    def release(self, holder: str) -> None:
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (self._name, holder))

    def close(self) -> None:
        self._db.close()
