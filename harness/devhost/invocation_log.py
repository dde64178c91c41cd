"""Each invocation's outcome, per function, in a small SQLite file in devhost's data directory.

The Functions host records every execution (its "requests" rows in Application Insights, with
``operation_Name`` = the function and ``success``); an operator on this machine gets the same from
here: ``ops status``, ``ops watch`` and the local page read it (ops/function_failures.py). Written
by the host side on each invocation, so a killed worker or a killed devhost loses no count: the
row is committed before the host acts on the outcome. WAL with ``synchronous=NORMAL``: a
committed row survives the process being killed (only an OS crash can lose the last ones), and a
commit costs no fsync, so the hot path pays one small write per invocation.
"""

import contextlib
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

FILE = "invocations.db"
ERROR_CHARS = 2000  # a stack trace is for the logs; the panel shows what failed

SCHEMA = """
CREATE TABLE IF NOT EXISTS function_outcomes (
    function TEXT PRIMARY KEY,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    last_failed_at TEXT
)
"""


@dataclass(frozen=True)
class FunctionOutcomes:
    function: str
    succeeded: int
    failed: int
    last_error: str | None
    last_failed_at: str | None


class InvocationLog:
    """The host's writer: one connection, on the host's event-loop thread."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(data_dir / FILE, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(SCHEMA)

    def succeeded(self, function: str) -> None:
        self._db.execute(
            "INSERT INTO function_outcomes (function, succeeded) VALUES (?, 1) "
            "ON CONFLICT (function) DO UPDATE SET succeeded = succeeded + 1",
            (function,),
        )

    def failed(self, function: str, error: str, at: datetime) -> None:
        self._db.execute(
            "INSERT INTO function_outcomes (function, failed, last_error, last_failed_at) "
            "VALUES (?, 1, ?, ?) "
            "ON CONFLICT (function) DO UPDATE SET failed = failed + 1, "
            "last_error = excluded.last_error, last_failed_at = excluded.last_failed_at",
            (function, error[:ERROR_CHARS], at.isoformat()),
        )

    def close(self) -> None:
        self._db.close()


def read(data_dir: Path) -> list[FunctionOutcomes]:
    """Every function's outcomes, failures first; empty when devhost has not run there yet."""
    path = data_dir / FILE
    if not path.exists():
        return []
    # Read-only (mode=ro): an operator's look never creates or locks the host's file.
    with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        try:
            rows = db.execute(
                "SELECT function, succeeded, failed, last_error, last_failed_at FROM function_outcomes "
                "ORDER BY failed DESC, last_failed_at DESC, function"
            ).fetchall()
        except sqlite3.OperationalError:  # the host created the file but not yet the table
            return []
    return [FunctionOutcomes(*row) for row in rows]
