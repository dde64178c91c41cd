"""A SQLite database file shared by threads and processes, for the embedded profile.

Each thread gets its own connection (sqlite3 connections must not be shared across threads);
WAL lets readers run beside the single writer; ``busy_timeout`` makes a writer wait for the
lock instead of failing, so several processes can use one file safely.
"""

import base64
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BUSY_TIMEOUT_SECONDS = 30.0


class SqliteDatabase:
    """``rows``: rows as ``sqlite3.Row`` (read by column name), else tuples."""

    def __init__(
        self, path: str | Path, schema: str, *, rows: bool = False, synchronous: str = "FULL"
    ) -> None:
        if str(path) == ":memory:":
            raise ValueError("a shared database needs a file: ':memory:' is private to one connection")
        self.path = Path(path)
        self._rows = rows
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        self._synchronous = synchronous
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._opened_lock = threading.Lock()
        # executescript commits on its own; the DDL is IF NOT EXISTS, so racing processes agree.
        self.connection().executescript(schema)

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # isolation_level=None: no implicit transactions; ``transaction`` opens them explicitly.
            # check_same_thread=False only so that ``close`` may close every thread's connection.
            conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,
            )
            if self._rows:
                conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            # FULL (the default): a committed write survives a crash of the machine, not only of
            # the process (C4). NORMAL in WAL mode: it survives the process being killed (the WAL
            # is in the OS's page cache), and only a power loss may undo the last commits.
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            self._local.conn = conn
            with self._opened_lock:
                self._opened.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the write lock up front (no upgrade deadlocks)."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        with self._opened_lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()
        self._local = threading.local()


def encode_token(complete_by: str, order_id: str) -> str:
    """A continuation token: the (CompleteBy, OrderID) key a page ended on, opaque to callers."""
    return base64.urlsafe_b64encode(json.dumps([complete_by, order_id]).encode()).decode()


def decode_token(token: str) -> tuple[str, str]:
    try:
        complete_by, order_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        return str(complete_by), str(order_id)
    except (ValueError, TypeError) as error:
        raise ValueError(f"invalid continuation token {token!r:.60}") from error
