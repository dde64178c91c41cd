"""devhost's Durable task hub: instances, history, inboxes, timers and activity work in one SQLite file.

Only persistence: the tables and the statements on them. What the rows mean (when an instance
completes, what an episode consumes, which results are dropped) is the engine's
(``harness.devhost.durable_engine``). Events are stored as the wire's JSON text
(``harness.devhost.durable_wire``),
never re-serialised here.

One host owns the file (the data directory's lock), and writes run on its event-loop thread, so
reads outside a transaction see everything committed. Writes go through ``tx()``, one
``BEGIN IMMEDIATE`` transaction each.
"""

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.devhost.durable_wire import RuntimeStatus, format_time, parse_time

SCHEMA = """
CREATE TABLE IF NOT EXISTS instances (
    instance_id   TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    execution_id  TEXT NOT NULL,
    status        TEXT NOT NULL,
    input         TEXT,
    output        TEXT,
    custom_status TEXT,
    completing    INTEGER NOT NULL DEFAULT 0,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_instances_status ON instances (status);
CREATE TABLE IF NOT EXISTS history (
    instance_id TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    event       TEXT NOT NULL,
    PRIMARY KEY (instance_id, seq)
);
-- Events waiting for the orchestrator: start, activity results, raised events, timers
-- (a timer is an inbox row that becomes visible at its FireAt; cancelling deletes it).
CREATE TABLE IF NOT EXISTS inbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id  TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    timer_id     INTEGER,
    visible_at   TEXT NOT NULL,
    event        TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_inbox_visible ON inbox (visible_at, id);
CREATE INDEX IF NOT EXISTS ix_inbox_instance ON inbox (instance_id, id);
CREATE TABLE IF NOT EXISTS activities (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    instance_id  TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    task_id      INTEGER NOT NULL,
    name         TEXT NOT NULL,
    input        TEXT,
    locked_until TEXT  -- unused now (leases live in memory); kept so older data directories open
);
-- A sub-orchestration's parent and the task ID it waits on (a table of its own, so older data
-- directories open unchanged).
CREATE TABLE IF NOT EXISTS parents (
    instance_id        TEXT PRIMARY KEY,
    parent_instance_id TEXT NOT NULL,
    parent_execution   TEXT NOT NULL,
    task_id            INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS schedules (
    function_name TEXT PRIMARY KEY,
    last_fired    TEXT NOT NULL
);
"""

_INSTANCE_COLUMNS = (
    "instance_id, name, execution_id, status, input, output, custom_status, completing,"
    " created_at, updated_at"
)


@dataclass(frozen=True)
class Instance:
    """A row of ``instances``. ``completing``: the orchestrator returned, but an uncancelled
    durable timer keeps the instance running until it fires."""

    instance_id: str
    name: str
    execution_id: str
    status: RuntimeStatus
    input: str | None
    output: str | None
    custom_status: str | None
    completing: bool
    created_at: str
    updated_at: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> "Instance":
        """From the columns of ``_INSTANCE_COLUMNS``, in that order."""
        return cls(
            row[0],
            row[1],
            row[2],
            RuntimeStatus(row[3]),
            row[4],
            row[5],
            row[6],
            bool(row[7]),
            row[8],
            row[9],
        )


@dataclass(frozen=True)
class InboxMessage:
    """An event waiting for its instance's next episode, as JSON text."""

    id: int
    execution_id: str
    event: str


@dataclass(frozen=True)
class ActivityWork:
    """An activity an orchestrator scheduled and no result has been recorded for."""

    id: int
    instance_id: str
    execution_id: str
    task_id: int
    name: str
    input: str | None


@dataclass(frozen=True)
class ParentLink:
    """The orchestration a sub-orchestration reports to, and the task of its call."""

    instance_id: str
    execution_id: str
    task_id: int


class _Reads:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def parent(self, instance_id: str) -> ParentLink | None:
        row = self.conn.execute(
            "SELECT parent_instance_id, parent_execution, task_id FROM parents WHERE instance_id = ?",
            (instance_id,),
        ).fetchone()
        return None if row is None else ParentLink(str(row[0]), str(row[1]), int(row[2]))

    def instance(self, instance_id: str) -> Instance | None:
        row = self.conn.execute(
            f"SELECT {_INSTANCE_COLUMNS} FROM instances WHERE instance_id = ?", (instance_id,)
        ).fetchone()
        return None if row is None else Instance.from_row(row)

    def pending_timers(self, instance_id: str) -> int:
        """Timers of the instance not yet fired nor cancelled."""
        return int(
            self.conn.execute(
                "SELECT COUNT(*) FROM inbox WHERE instance_id = ? AND timer_id IS NOT NULL", (instance_id,)
            ).fetchone()[0]
        )


class StoreTx(_Reads):
    """The writes, inside one ``DurableStore.tx()`` transaction."""

    def insert_instance(
        self, instance_id: str, *, name: str, execution_id: str, input_json: str | None, now: datetime
    ) -> None:
        self.conn.execute(
            "INSERT INTO instances (instance_id, name, execution_id, status, input, created_at,"
            " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                instance_id,
                name,
                execution_id,
                RuntimeStatus.PENDING,
                input_json,
                format_time(now),
                format_time(now),
            ),
        )

    def link_parent(self, instance_id: str, parent: ParentLink) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO parents (instance_id, parent_instance_id, parent_execution, task_id)"
            " VALUES (?, ?, ?, ?)",
            (instance_id, parent.instance_id, parent.execution_id, parent.task_id),
        )

    def restart_instance(
        self, instance_id: str, *, execution_id: str, input_json: str | None, now: datetime
    ) -> None:
        """Continue-as-new: a new execution, running, its history gone."""
        self.conn.execute("DELETE FROM history WHERE instance_id = ?", (instance_id,))
        self.conn.execute(
            "UPDATE instances SET execution_id = ?, input = ?, status = ?, completing = 0, updated_at = ?"
            " WHERE instance_id = ?",
            (execution_id, input_json, RuntimeStatus.RUNNING, format_time(now), instance_id),
        )

    def mark_running(self, instance_id: str, custom_status: str | None, now: datetime) -> None:
        self.conn.execute(
            "UPDATE instances SET status = ?, custom_status = ?, updated_at = ? WHERE instance_id = ?",
            (RuntimeStatus.RUNNING, custom_status, format_time(now), instance_id),
        )

    def mark_completing(self, instance_id: str, output: str) -> None:
        self.conn.execute(
            "UPDATE instances SET output = ?, completing = 1 WHERE instance_id = ?", (output, instance_id)
        )

    def finish(self, instance_id: str, status: RuntimeStatus, output: str | None, now: datetime) -> None:
        self.conn.execute(
            "UPDATE instances SET status = ?, output = ?, completing = 0, updated_at = ?"
            " WHERE instance_id = ?",
            (status, output, format_time(now), instance_id),
        )

    def append_history(self, instance_id: str, first_seq: int, events: Sequence[str]) -> None:
        self.conn.executemany(
            "INSERT INTO history (instance_id, seq, event) VALUES (?, ?, ?)",
            [(instance_id, first_seq + i, event) for i, event in enumerate(events)],
        )

    def deliver(self, instance_id: str, execution_id: str, event: str, now: datetime) -> None:
        """An event for the instance's next episode, visible at once."""
        self.conn.execute(
            "INSERT INTO inbox (instance_id, execution_id, visible_at, event) VALUES (?, ?, ?, ?)",
            (instance_id, execution_id, format_time(now), event),
        )

    def add_timer(
        self, instance_id: str, execution_id: str, timer_id: int, fire_at: datetime, event: str
    ) -> None:
        """A timer: its TimerFired event, visible at its FireAt."""
        self.conn.execute(
            "INSERT INTO inbox (instance_id, execution_id, timer_id, visible_at, event)"
            " VALUES (?, ?, ?, ?, ?)",
            (instance_id, execution_id, timer_id, format_time(fire_at), event),
        )

    def cancel_timer(self, instance_id: str, timer_id: int) -> None:
        self.conn.execute("DELETE FROM inbox WHERE instance_id = ? AND timer_id = ?", (instance_id, timer_id))

    def take_messages(self, ids: Sequence[int]) -> int:
        """Delete these inbox rows; returns how many were still there."""
        return self.conn.executemany("DELETE FROM inbox WHERE id = ?", [(i,) for i in ids]).rowcount

    def add_activity(
        self, instance_id: str, execution_id: str, task_id: int, name: str, input_json: str | None
    ) -> None:
        self.conn.execute(
            "INSERT INTO activities (instance_id, execution_id, task_id, name, input) VALUES (?, ?, ?, ?, ?)",
            (instance_id, execution_id, task_id, name, input_json),
        )

    def take_activity(self, work_id: int) -> bool:
        """Delete the activity; False if it was gone (its instance terminated, purged or restarted)."""
        return self.conn.execute("DELETE FROM activities WHERE id = ?", (work_id,)).rowcount > 0

    def drop_work(self, instance_id: str) -> None:
        """Everything still waiting for the instance: its inbox (timers included) and activities."""
        self.conn.execute("DELETE FROM inbox WHERE instance_id = ?", (instance_id,))
        self.conn.execute("DELETE FROM activities WHERE instance_id = ?", (instance_id,))

    def forget(self, instance_id: str) -> None:
        """The instance and all it left behind, as a purge does."""
        self.drop_work(instance_id)
        self.conn.execute("DELETE FROM history WHERE instance_id = ?", (instance_id,))
        self.conn.execute("DELETE FROM instances WHERE instance_id = ?", (instance_id,))
        self.conn.execute("DELETE FROM parents WHERE instance_id = ?", (instance_id,))

    def record_fired(self, function_name: str, stamp: str) -> None:
        """A timer trigger's latest occurrence, as the host stamps it (``last_fired`` reads it)."""
        self.conn.execute(
            "INSERT INTO schedules (function_name, last_fired) VALUES (?, ?)"
            " ON CONFLICT (function_name) DO UPDATE SET last_fired = excluded.last_fired",
            (function_name, stamp),
        )


class DurableStore(_Reads):
    """Owns the durable SQLite file. Used from the host's event-loop thread only."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        super().__init__(sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30))
        self.conn.execute("PRAGMA journal_mode=WAL")
        # WAL with synchronous=NORMAL: a commit is in the WAL before it returns, so a killed
        # process loses nothing committed; only an OS crash or power cut can lose the last few.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(SCHEMA)
        self._lock = threading.RLock()

    @contextmanager
    def tx(self) -> Iterator[StoreTx]:
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield StoreTx(self.conn)
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()

    # --- reads outside a transaction --------------------------------------------------------------

    def instances(self) -> list[Instance]:
        rows = self.conn.execute(
            f"SELECT {_INSTANCE_COLUMNS} FROM instances ORDER BY created_at, instance_id"
        ).fetchall()
        return [Instance.from_row(row) for row in rows]

    def history(self, instance_id: str) -> list[str]:
        """The instance's history events, as stored JSON texts, in order."""
        rows = self.conn.execute(
            "SELECT event FROM history WHERE instance_id = ? ORDER BY seq", (instance_id,)
        ).fetchall()
        return [str(row[0]) for row in rows]

    def visible_messages(self, instance_id: str, now: datetime) -> list[InboxMessage]:
        """The instance's inbox rows visible at ``now``, in the order they became visible: a
        reply raised before a timer's FireAt comes before the TimerFired."""
        rows = self.conn.execute(
            "SELECT id, execution_id, event FROM inbox WHERE instance_id = ? AND visible_at <= ?"
            " ORDER BY visible_at, id",
            (instance_id, format_time(now)),
        ).fetchall()
        return [InboxMessage(int(row[0]), str(row[1]), str(row[2])) for row in rows]

    def ready_instances(self, now: datetime, limit: int) -> list[str]:
        """Instances with an inbox row visible at ``now``, the longest waiting first."""
        rows = self.conn.execute(
            "SELECT instance_id, MIN(id) AS first FROM inbox WHERE visible_at <= ?"
            " GROUP BY instance_id ORDER BY first LIMIT ?",
            (format_time(now), limit),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def next_visible(self, now: datetime) -> datetime | None:
        """When the next inbox row (a timer) becomes visible after ``now``."""
        row = self.conn.execute(
            "SELECT MIN(visible_at) FROM inbox WHERE visible_at > ?", (format_time(now),)
        ).fetchone()
        return parse_time(row[0]) if row and row[0] else None

    def activities(self, limit: int) -> list[ActivityWork]:
        """The first ``limit`` activities without a result, oldest first."""
        rows = self.conn.execute(
            "SELECT id, instance_id, execution_id, task_id, name, input FROM activities ORDER BY id LIMIT ?",
            (limit,),
        ).fetchall()
        return [ActivityWork(*row) for row in rows]

    def pending_activities(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM activities").fetchone()[0])

    def last_fired(self, function_name: str) -> str | None:
        """A timer trigger's latest occurrence, as the host stamped it (``StoreTx.record_fired``)."""
        row = self.conn.execute(
            "SELECT last_fired FROM schedules WHERE function_name = ?", (function_name,)
        ).fetchone()
        return None if row is None else str(row[0])
