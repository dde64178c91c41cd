"""The embedded recovery index (E14): entries by (Bucket, CompleteBy) in their own SQLite file.

A file of its own, as the Cosmos index is a container of its own: the entry and the state
record are two separate writes, and the crash between them is a case the design covers.
"""

from datetime import datetime, timedelta
from pathlib import Path

from adapters.sqlite.db import SqliteDatabase, decode_token, encode_token
from domain.recovery_index import IndexEntry, IndexPage, check_bucket_size, recovery_bucket
from domain.timestamps import format_ts, parse_ts

# The primary key is the scan's access path: one bucket, in CompleteBy order. It also makes
# (OrderID, CompleteBy) unique, since the bucket follows from CompleteBy.
SCHEMA = """
CREATE TABLE IF NOT EXISTS recovery_index (
    bucket      TEXT NOT NULL,
    complete_by TEXT NOT NULL,
    order_id    TEXT NOT NULL,
    PRIMARY KEY (bucket, complete_by, order_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS recovery_cursor (
    name           TEXT PRIMARY KEY,
    bucket         TEXT NOT NULL,
    bucket_seconds INTEGER NOT NULL
);
"""

_CURSOR = "supervisor"


class SqliteRecoveryIndex:
    def __init__(self, path: str | Path, bucket_size: timedelta) -> None:
        if bucket_size <= timedelta(0):
            raise ValueError("the bucket size must be positive")
        self._bucket_size = bucket_size
        self._db = SqliteDatabase(path, SCHEMA)

    @property
    def bucket_size(self) -> timedelta:
        return self._bucket_size

    @property
    def database(self) -> SqliteDatabase:
        """The underlying database, for benchmarks (counting SQLite's work)."""
        return self._db

    def close(self) -> None:
        self._db.close()

    def add(self, order_id: str, complete_by: datetime) -> IndexEntry:
        entry = IndexEntry(order_id, complete_by, recovery_bucket(complete_by, self._bucket_size))
        # An entry is all key: "ignore the repeat" is the upsert.
        self._db.connection().execute(
            "INSERT INTO recovery_index (bucket, complete_by, order_id) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (format_ts(entry.Bucket), format_ts(complete_by), order_id),
        )
        return entry

    def due(self, bucket: datetime, now: datetime, limit: int, continuation: str | None = None) -> IndexPage:
        # Keyset paging on (complete_by, order_id): removing entries never shifts a page.
        after = decode_token(continuation) if continuation else ("", "")
        rows = (
            self._db.connection()
            .execute(
                "SELECT complete_by, order_id FROM recovery_index"
                " WHERE bucket = ? AND complete_by < ? AND (complete_by, order_id) > (?, ?)"
                " ORDER BY complete_by, order_id LIMIT ?",
                (format_ts(bucket), format_ts(now), *after, limit + 1),
            )
            .fetchall()
        )
        more = len(rows) > limit
        rows = rows[:limit]
        entries = [IndexEntry(order_id, parse_ts(cb), bucket) for cb, order_id in rows]
        token = encode_token(rows[-1][0], rows[-1][1]) if more else None
        return IndexPage(entries=entries, continuation=token, cost=float(1 + len(rows)))

    def first_bucket(self, start: datetime, end: datetime) -> tuple[datetime | None, float]:
        row = (
            self._db.connection()
            .execute(
                "SELECT min(bucket) FROM recovery_index WHERE bucket >= ? AND bucket <= ?",
                (format_ts(start), format_ts(end)),
            )
            .fetchone()
        )
        return (None if row[0] is None else parse_ts(row[0])), 1.0

    def remove(self, entry: IndexEntry) -> float:
        self._db.connection().execute(
            "DELETE FROM recovery_index WHERE bucket = ? AND complete_by = ? AND order_id = ?",
            (format_ts(entry.Bucket), format_ts(entry.CompleteBy), entry.OrderID),
        )
        return 1.0

    def cursor(self) -> datetime | None:
        row = (
            self._db.connection()
            .execute("SELECT bucket, bucket_seconds FROM recovery_cursor WHERE name = ?", (_CURSOR,))
            .fetchone()
        )
        if row is None:
            return None
        check_bucket_size(float(row[1]), self._bucket_size)
        return parse_ts(row[0])

    def advance_cursor(self, bucket: datetime) -> float:
        # max(): of two Supervisors advancing at once, the further one stays.
        self._db.connection().execute(
            "INSERT INTO recovery_cursor (name, bucket, bucket_seconds) VALUES (?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET bucket = max(bucket, excluded.bucket)",
            (_CURSOR, format_ts(bucket), int(self._bucket_size.total_seconds())),
        )
        return 1.0
