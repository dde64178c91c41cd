"""A local Service Bus: Azure Service Bus queue semantics (peek-lock) stored in one SQLite file.

For local development and tests only: the devhost Functions host, a separate agent worker
process and the test suite all open the same file, so messages pass between processes as they
would through a namespace. Production uses Azure Service Bus itself.

What it keeps from Service Bus: FIFO by sequence number, peek-lock with lock tokens and lock
expiry, delivery counts and the max-delivery-count rule, dead-letter sub-queues
(``<queue>/$deadletterqueue``), duplicate detection by MessageId, scheduled messages, message
time-to-live (the queue's DefaultMessageTimeToLive capping a message's own, dead-lettered as
``TTLExpiredException`` with DeadLetteringOnMessageExpiration, else dropped), and
case-insensitive entity paths.

Expiry is lazy, as Service Bus documents it may be: an expired message is never received, and
is moved (or dropped) by the next receive of its queue or of its dead-letter queue, or when it
is abandoned; until then a peek or a count still sees it. A locked message does not expire
while its lock is held (https://learn.microsoft.com/azure/service-bus-messaging/message-expiration).

Every time is taken from the injected clock, so a host with a virtual clock can jump to
``next_due()`` instead of sleeping. Receive and settle run in ``BEGIN IMMEDIATE`` transactions,
which makes their select-then-update atomic across threads and processes; a receive first looks
without a transaction, so one that finds nothing never takes the write lock.

``synchronous=NORMAL`` (WAL): a commit is durable against the process being killed, which is what
a local bus must survive (tests/contract/test_local_bus_kill.py kills a sender mid-burst); a power
loss may undo the last commits, which nothing local relies on. FULL cost 0.39 ms a transaction
against 0.027 ms, on the file every send, receive and settlement writes.
"""

import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusError

from adapters.servicebus import limits
from adapters.servicebus.messages import (
    DEAD_LETTER_SUFFIX,
    MAX_DELIVERY_COUNT_EXCEEDED,
    NOT_LOCKED,
    MessageAlreadySettled,
    MessageLockLost,
    QueueConfig,
    QueueNotFound,
    ReceivedMessage,
    split_entity,
)
from adapters.sqlite.db import SqliteDatabase
from domain.timestamps import as_utc, format_ts, parse_optional, parse_ts

_MICROSECOND = timedelta(microseconds=1)
SCHEMA = """
CREATE TABLE IF NOT EXISTS queues (
    name                TEXT PRIMARY KEY,
    max_delivery_count  INTEGER NOT NULL,
    lock_duration_us    INTEGER NOT NULL,
    duplicate_window_us INTEGER,
    default_ttl_us      INTEGER,
    dead_letter_on_expiration INTEGER NOT NULL DEFAULT 0
);
-- visible_at is the one moment receive looks at: the scheduled enqueue time, or the lock's
-- expiry while locked, so that "receivable now" is a single comparison.
CREATE TABLE IF NOT EXISTS messages (
    sequence_number               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue                         TEXT NOT NULL,
    dead_lettered                 INTEGER NOT NULL DEFAULT 0,
    visible_at                    TEXT NOT NULL,
    locked_until                  TEXT,
    lock_token                    TEXT,
    lock_duration_us              INTEGER,
    delivery_count                INTEGER NOT NULL DEFAULT 0,
    message_id                    TEXT NOT NULL,
    body                          BLOB NOT NULL,
    correlation_id                TEXT,
    content_type                  TEXT,
    subject                       TEXT,
    reply_to                      TEXT,
    application_properties        TEXT NOT NULL,
    enqueued_time                 TEXT NOT NULL,
    scheduled_enqueue_time        TEXT,
    dead_letter_reason            TEXT,
    dead_letter_error_description TEXT,
    expires_at                    TEXT
);
-- Receive walks one entity in sequence order and filters on visible_at inside the index.
CREATE INDEX IF NOT EXISTS ix_messages_receive
    ON messages (queue, dead_lettered, sequence_number, visible_at);
CREATE INDEX IF NOT EXISTS ix_messages_due ON messages (visible_at);
CREATE TABLE IF NOT EXISTS duplicates (
    queue      TEXT NOT NULL,
    message_id TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    PRIMARY KEY (queue, message_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ix_duplicates_expiry ON duplicates (expires_at);
"""
# Columns added since the first files were written: a file from before gets them on open (SQLite
# has no ADD COLUMN IF NOT EXISTS, so each is looked up first, inside one write transaction).
_ADDED_COLUMNS = (
    ("queues", "default_ttl_us", "INTEGER"),
    ("queues", "dead_letter_on_expiration", "INTEGER NOT NULL DEFAULT 0"),
    ("messages", "expires_at", "TEXT"),
)
# After the migration: it indexes a column an old file only has once migrated.
_EXPIRY_INDEX = (
    "CREATE INDEX IF NOT EXISTS ix_messages_expiry ON messages (queue, dead_lettered, expires_at)"
    " WHERE expires_at IS NOT NULL"
)
# What Service Bus writes on a message it dead-letters for its time-to-live (the reason is the
# message-expiration page's; the description is the one the AMQP test broker gives).
TTL_EXPIRED = "TTLExpiredException"
TTL_EXPIRED_DESCRIPTION = "The message expired and was dead lettered."

_MESSAGE_COLUMNS = (
    "sequence_number, queue, dead_lettered, locked_until, lock_token, delivery_count, message_id, body,"
    " correlation_id, content_type, subject, reply_to, application_properties, enqueued_time,"
    " scheduled_enqueue_time, dead_letter_reason, dead_letter_error_description"
)


def _micros(duration: timedelta) -> int:
    return duration // _MICROSECOND


def _system_clock() -> datetime:
    return datetime.now(UTC)


def _entity_name(queue: str, dead_lettered: bool) -> str:
    return queue + DEAD_LETTER_SUFFIX if dead_lettered else queue


def _message(
    row: sqlite3.Row, *, delivery_count: int, lock_token: str, locked_until: datetime
) -> ReceivedMessage:
    return ReceivedMessage(
        queue=_entity_name(row["queue"], bool(row["dead_lettered"])),
        sequence_number=row["sequence_number"],
        message_id=row["message_id"],
        body=bytes(row["body"]),
        correlation_id=row["correlation_id"],
        content_type=row["content_type"],
        subject=row["subject"],
        reply_to=row["reply_to"],
        application_properties=json.loads(row["application_properties"]),
        delivery_count=delivery_count,
        enqueued_time=parse_ts(row["enqueued_time"]),
        scheduled_enqueue_time=parse_optional(row["scheduled_enqueue_time"]),
        locked_until=locked_until,
        lock_token=lock_token,
        dead_letter_reason=row["dead_letter_reason"],
        dead_letter_error_description=row["dead_letter_error_description"],
    )


def _optional_micros(duration: timedelta | None) -> int | None:
    return None if duration is None else _micros(duration)


def _optional_duration(micros: int | None) -> timedelta | None:
    return None if micros is None else timedelta(microseconds=micros)


def _config(row: sqlite3.Row) -> QueueConfig:
    return QueueConfig(
        name=row["name"],
        max_delivery_count=row["max_delivery_count"],
        lock_duration=timedelta(microseconds=row["lock_duration_us"]),
        duplicate_detection_window=_optional_duration(row["duplicate_window_us"]),
        default_message_ttl=_optional_duration(row["default_ttl_us"]),
        dead_letter_on_expiration=bool(row["dead_letter_on_expiration"]),
    )


def _migrate(conn: sqlite3.Connection) -> None:
    for table, column, definition in _ADDED_COLUMNS:
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
    conn.execute(_EXPIRY_INDEX)


def message_ttl(own: timedelta | None, queue_default: timedelta | None) -> timedelta | None:
    """The time-to-live Service Bus applies: the smaller of the message's own and the queue's
    default, the default being "a ceiling for the TimeToLive value" (message-expiration page).
    The own TTL in whole seconds, as azure-servicebus sends it (``ServiceBusMessage.time_to_live``
    sets the AMQP header's ttl to ``int(total_seconds()) * 1000``), so under a second is none."""
    if own is not None and own < timedelta(0):
        raise ValueError(f"time_to_live must not be negative, not {own}")
    whole = None if own is None else timedelta(seconds=int(own.total_seconds()))
    ttls = [t for t in (whole, queue_default) if t]
    return min(ttls) if ttls else None


def _expiry(enqueued: datetime, ttl: timedelta | None) -> datetime | None:
    if ttl is None:
        return None
    try:
        return enqueued + ttl
    except OverflowError:  # TimeSpan.MaxValue, Service Bus's default: never, in practice
        return None


class LocalServiceBus:
    """Queues in one SQLite file; any number of instances in any number of processes may share it."""

    def __init__(
        self,
        path: str | Path,
        queues: Iterable[QueueConfig] = (),
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._db = SqliteDatabase(path, SCHEMA, rows=True, synchronous="NORMAL")
        self.path = self._db.path
        self._clock = clock or _system_clock
        with self._transaction() as conn:
            _migrate(conn)
        for config in queues:
            self.declare(config)

    # -- connections -----------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        return self._db.connection()

    def _transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front: two receivers can never select the same row,
        # and there is no read-to-write upgrade to deadlock on.
        return self._db.transaction()

    def commit_marker(self) -> int:
        """Where this thread's view of the bus stands, for ``wait_for_commit``: take it before
        looking, so that a commit between the look and the wait is not missed."""
        marker: int = self._connection().execute("PRAGMA data_version").fetchone()[0]
        return marker

    def wait_for_commit(self, since: int, timeout: float, interval: float = 0.02) -> bool:
        """Block until another connection (another process or thread) has committed to the bus
        since ``since`` (a ``commit_marker`` of this thread), or ``timeout`` seconds pass; True if
        something was committed. Cheap enough to idle on: it reads SQLite's ``data_version``
        counter, no transaction and no lock. Messages that become visible without a commit (a
        scheduled time, an expired lock) are not signalled: wait with a timeout, then look again."""
        deadline = time.monotonic() + timeout
        while True:
            if self.commit_marker() != since:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------------

    def _now(self) -> datetime:
        return as_utc(self._clock())

    def _entity(self, conn: sqlite3.Connection, path: str) -> tuple[QueueConfig, bool]:
        name, dead_lettered = split_entity(path)
        row = conn.execute("SELECT * FROM queues WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise QueueNotFound(f"queue {name!r} is not declared")
        return _config(row), dead_lettered

    def _locked_row(self, conn: sqlite3.Connection, message: ReceivedMessage, now: datetime) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute(
            "SELECT queue, dead_lettered, lock_token, locked_until, lock_duration_us, delivery_count"
            " FROM messages WHERE sequence_number = ?",
            (message.sequence_number,),
        ).fetchone()
        # Left the entity it was received from: a dead-letter queue's messages never move back.
        if row is None or bool(row["dead_lettered"]) != split_entity(message.queue)[1]:
            where = "is gone" if row is None else "is in the dead-letter queue"
            raise MessageAlreadySettled(
                f"message {message.message_id!r} (#{message.sequence_number}) on {message.queue!r}"
                f" {where}: it was settled already"
            )
        if row["lock_token"] != message.lock_token:
            raise MessageLockLost(
                f"message {message.message_id!r} (#{message.sequence_number}) on {message.queue!r}:"
                " the lock token is no longer current"
            )
        if row["locked_until"] <= format_ts(now):
            raise MessageLockLost(
                f"message {message.message_id!r} (#{message.sequence_number}) on {message.queue!r}:"
                f" the lock expired at {row['locked_until']}"
            )
        return row

    @staticmethod
    def _move_to_dead_letter(
        conn: sqlite3.Connection, sequence_number: int, reason: str, description: str | None, now: datetime
    ) -> None:
        # The dead-letter queue keeps what it is given: no expiry there.
        conn.execute(
            "UPDATE messages SET dead_lettered = 1, visible_at = ?, locked_until = NULL, lock_token = NULL,"
            " lock_duration_us = NULL, dead_letter_reason = ?, dead_letter_error_description = ?,"
            " expires_at = NULL WHERE sequence_number = ?",
            (format_ts(now), reason, description, sequence_number),
        )

    @staticmethod
    def _expire(conn: sqlite3.Connection, config: QueueConfig, now: datetime) -> None:
        """Dead-letter (or drop) every expired message of the queue that no lock holds. One
        that has used up its deliveries is left to the max-delivery rule, which Service Bus
        applies first when a lock is given back (the broker's ``_return``)."""
        expired = (
            " WHERE queue = :queue AND dead_lettered = 0 AND expires_at <= :now AND visible_at <= :now"
            " AND delivery_count < :max"
        )
        params = {"queue": config.name, "now": format_ts(now), "max": config.max_delivery_count}
        if not config.dead_letter_on_expiration:
            conn.execute("DELETE FROM messages" + expired, params)
            return
        conn.execute(
            "UPDATE messages SET dead_lettered = 1, visible_at = :now, locked_until = NULL,"
            " lock_token = NULL, lock_duration_us = NULL, dead_letter_reason = :reason,"
            " dead_letter_error_description = :description, expires_at = NULL" + expired,
            {**params, "reason": TTL_EXPIRED, "description": TTL_EXPIRED_DESCRIPTION},
        )

    # -- queues ----------------------------------------------------------------------------

    def declare(self, config: QueueConfig) -> None:
        """Create or update a queue; a property Service Bus would refuse raises ValueError."""
        check_queue(config)
        self._connection().execute(
            "INSERT INTO queues (name, max_delivery_count, lock_duration_us, duplicate_window_us,"
            " default_ttl_us, dead_letter_on_expiration)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
            " max_delivery_count = excluded.max_delivery_count,"
            " lock_duration_us = excluded.lock_duration_us,"
            " duplicate_window_us = excluded.duplicate_window_us,"
            " default_ttl_us = excluded.default_ttl_us,"
            " dead_letter_on_expiration = excluded.dead_letter_on_expiration",
            (
                config.name,
                config.max_delivery_count,
                _micros(config.lock_duration),
                _optional_micros(config.duplicate_detection_window),
                _optional_micros(config.default_message_ttl),
                int(config.dead_letter_on_expiration),
            ),
        )

    def queues(self) -> list[QueueConfig]:
        rows = self._connection().execute("SELECT * FROM queues ORDER BY name").fetchall()
        return [_config(row) for row in rows]

    # -- sending ---------------------------------------------------------------------------

    def send(
        self,
        queue: str,
        body: bytes | str,
        *,
        message_id: str | None = None,
        correlation_id: str | None = None,
        content_type: str | None = None,
        subject: str | None = None,
        reply_to: str | None = None,
        application_properties: Mapping[str, Any] | None = None,
        scheduled_enqueue_time: datetime | None = None,
        time_to_live: timedelta | None = None,
    ) -> bool:
        """Enqueue one message; False (and nothing stored) when it is a duplicate inside the window.
        ``time_to_live`` is ``ServiceBusMessage.time_to_live``; the queue's default caps it."""
        if isinstance(body, str):
            data = body.encode("utf-8")
        elif isinstance(body, bytes | bytearray | memoryview):
            data = bytes(body)
        else:
            raise TypeError(f"body must be bytes or str, not {type(body).__name__}")
        message_id = uuid.uuid4().hex if message_id is None else message_id
        ids = {
            "message_id": message_id,
            "correlation_id": correlation_id,
            "subject": subject,
            "reply_to": reply_to,
        }
        check_message(data, ids, dict(application_properties or {}))
        message_ttl(time_to_live, None)  # a negative one is refused before anything is stored
        properties = json.dumps(dict(application_properties or {}), separators=(",", ":"))
        scheduled = None if scheduled_enqueue_time is None else as_utc(scheduled_enqueue_time)
        with self._transaction() as conn:
            config, dead_lettered = self._entity(conn, queue)
            if dead_lettered:
                raise ValueError(f"cannot send to a dead-letter queue ({queue!r})")
            now = self._now()
            if config.duplicate_detection_window is not None:
                # The purge is what lets an id back in once its window (from the first send) is over.
                conn.execute("DELETE FROM duplicates WHERE expires_at <= ?", (format_ts(now),))
                inserted = conn.execute(
                    "INSERT INTO duplicates (queue, message_id, expires_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (queue, message_id) DO NOTHING",
                    (config.name, message_id, format_ts(now + config.duplicate_detection_window)),
                )
                if inserted.rowcount == 0:
                    return False
            # As in Service Bus, a scheduled message counts as enqueued when it becomes active.
            enqueued = now if scheduled is None or scheduled <= now else scheduled
            # Expiry counts from the enqueued time (message-expiration page: ExpiresAtUtc is
            # EnqueuedTimeUtc + TimeToLive), so a scheduled message lives from when it appears.
            expires = _expiry(enqueued, message_ttl(time_to_live, config.default_message_ttl))
            conn.execute(
                "INSERT INTO messages (queue, visible_at, message_id, body, correlation_id, content_type,"
                " subject, reply_to, application_properties, enqueued_time, scheduled_enqueue_time,"
                " expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    config.name,
                    format_ts(enqueued),
                    message_id,
                    data,
                    correlation_id,
                    content_type,
                    subject,
                    reply_to,
                    properties,
                    format_ts(enqueued),
                    None if scheduled is None else format_ts(scheduled),
                    None if expires is None else format_ts(expires),
                ),
            )
        return True

    # -- receiving and settling ------------------------------------------------------------

    def receive(
        self, queue: str, max_messages: int = 1, *, lock_duration: timedelta | None = None
    ) -> list[ReceivedMessage]:
        """Peek-lock up to ``max_messages`` receivable messages, oldest first; never waits for more."""
        if max_messages < 1:
            raise ValueError("max_messages must be at least 1")
        if lock_duration is not None and lock_duration < _MICROSECOND:
            raise ValueError("lock_duration must be positive")
        received: list[ReceivedMessage] = []
        if not self._anything_receivable(queue):
            return received  # an idle receiver takes no write lock
        with self._transaction() as conn:
            config, dead_lettered = self._entity(conn, queue)
            duration = lock_duration or config.lock_duration
            now = self._now()
            locked_until = now + duration
            # Expired messages leave first, so none is received; from the dead-letter queue too,
            # which is where they go.
            self._expire(conn, config, now)
            # Rows dead-lettered on the way leave the entity, so asking again for the shortfall
            # always makes progress and ends.
            while len(received) < max_messages:
                rows = conn.execute(
                    f"SELECT {_MESSAGE_COLUMNS} FROM messages"
                    " WHERE queue = ? AND dead_lettered = ? AND visible_at <= ?"
                    " ORDER BY sequence_number LIMIT ?",
                    (config.name, int(dead_lettered), format_ts(now), max_messages - len(received)),
                ).fetchall()
                if not rows:
                    break
                for row in rows:
                    if not dead_lettered and row["delivery_count"] >= config.max_delivery_count:
                        self._move_to_dead_letter(
                            conn,
                            row["sequence_number"],
                            MAX_DELIVERY_COUNT_EXCEEDED,
                            _max_delivery_description(config),
                            now,
                        )
                        continue
                    received.append(self._lock(conn, row, duration, locked_until))
        return received

    def _lock(
        self, conn: sqlite3.Connection, row: sqlite3.Row, duration: timedelta, locked_until: datetime
    ) -> ReceivedMessage:
        token = str(uuid.uuid4())
        conn.execute(
            "UPDATE messages SET delivery_count = delivery_count + 1, lock_token = ?,"
            " locked_until = ?, visible_at = ?, lock_duration_us = ? WHERE sequence_number = ?",
            (
                token,
                format_ts(locked_until),
                format_ts(locked_until),
                _micros(duration),
                row["sequence_number"],
            ),
        )
        return _message(
            row, delivery_count=row["delivery_count"] + 1, lock_token=token, locked_until=locked_until
        )

    def receive_sequence_number(self, queue: str, sequence_number: int) -> ReceivedMessage | None:
        """Peek-lock the one message with ``sequence_number`` if it is receivable now, and touch
        nothing else (an operator moving one dead letter); None if it is not there or locked."""
        with self._transaction() as conn:
            config, dead_lettered = self._entity(conn, queue)
            now = self._now()
            self._expire(conn, config, now)
            row = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages"
                " WHERE queue = ? AND dead_lettered = ? AND visible_at <= ? AND sequence_number = ?",
                (config.name, int(dead_lettered), format_ts(now), sequence_number),
            ).fetchone()
            if row is None:
                return None
            return self._lock(conn, row, config.lock_duration, now + config.lock_duration)

    def _anything_receivable(self, queue: str) -> bool:
        """A look without a transaction (WAL: readers never wait for the writer). A message that
        arrives just after is found by the next receive, as on Service Bus."""
        conn = self._connection()
        config, dead_lettered = self._entity(conn, queue)
        now = format_ts(self._now())
        row = conn.execute(
            "SELECT 1 FROM messages WHERE queue = ? AND dead_lettered = ? AND visible_at <= ? LIMIT 1",
            (config.name, int(dead_lettered), now),
        ).fetchone()
        if row is None and dead_lettered:
            # Nothing dead-lettered yet, but an expired message is on its way there.
            row = conn.execute(
                "SELECT 1 FROM messages WHERE queue = ? AND dead_lettered = 0 AND expires_at <= ?"
                " AND visible_at <= ? LIMIT 1",
                (config.name, now, now),
            ).fetchone()
        return row is not None

    def complete(self, message: ReceivedMessage) -> None:
        with self._transaction() as conn:
            self._locked_row(conn, message, self._now())
            conn.execute("DELETE FROM messages WHERE sequence_number = ?", (message.sequence_number,))

    def abandon(self, message: ReceivedMessage) -> None:
        """Unlock at once; a message that has used up its deliveries goes to the dead-letter queue."""
        with self._transaction() as conn:
            now = self._now()
            row = self._locked_row(conn, message, now)
            if not row["dead_lettered"]:
                config, _ = self._entity(conn, row["queue"])
                if row["delivery_count"] >= config.max_delivery_count:
                    self._move_to_dead_letter(
                        conn,
                        message.sequence_number,
                        MAX_DELIVERY_COUNT_EXCEEDED,
                        _max_delivery_description(config),
                        now,
                    )
                    return
            conn.execute(
                "UPDATE messages SET visible_at = ?, locked_until = NULL, lock_token = NULL,"
                " lock_duration_us = NULL WHERE sequence_number = ?",
                (format_ts(now), message.sequence_number),
            )
            if not row["dead_lettered"]:
                # "If the lock expires or the message is abandoned, the expiration takes immediate
                # effect" (message-expiration page).
                self._expire(conn, self._entity(conn, row["queue"])[0], now)

    def dead_letter(self, message: ReceivedMessage, reason: str, description: str | None = None) -> None:
        check_dead_letter(reason, description)
        with self._transaction() as conn:
            now = self._now()
            row = self._locked_row(conn, message, now)
            if row["dead_lettered"]:
                raise ValueError(f"message #{message.sequence_number} is already in the dead-letter queue")
            self._move_to_dead_letter(conn, message.sequence_number, reason, description, now)

    def dead_letter_by_lock_token(
        self, queue: str, lock_token: str, reason: str, description: str | None = None
    ) -> None:
        """Dead-letter the message a trigger holds, knowing only its lock token.

        A function gets the lock token in its trigger metadata, not the received message; this is
        how it settles the message itself (the host then finds it settled and leaves it alone).
        """
        check_dead_letter(reason, description)
        with self._transaction() as conn:
            now = self._now()
            name, _ = split_entity(queue)
            row = conn.execute(
                "SELECT sequence_number, locked_until FROM messages"
                " WHERE queue = ? AND lock_token = ? AND dead_lettered = 0",
                (name, lock_token),
            ).fetchone()
            if row is None or row["locked_until"] <= format_ts(now):
                raise MessageLockLost(f"no message on {queue!r} holds a live lock {lock_token!r}")
            self._move_to_dead_letter(conn, row["sequence_number"], reason, description, now)

    def renew_lock(self, message: ReceivedMessage) -> datetime:
        """Extend the lock by the duration it was taken with; returns the new expiry."""
        with self._transaction() as conn:
            now = self._now()
            row = self._locked_row(conn, message, now)
            locked_until = now + timedelta(microseconds=row["lock_duration_us"])
            conn.execute(
                "UPDATE messages SET locked_until = ?, visible_at = ? WHERE sequence_number = ?",
                (format_ts(locked_until), format_ts(locked_until), message.sequence_number),
            )
        return locked_until

    # -- inspecting ------------------------------------------------------------------------

    def peek(self, queue: str, max_messages: int = 100) -> list[ReceivedMessage]:
        """Every message of the entity in sequence order, locked and scheduled ones included.

        Nothing changes. A peeked message carries no lock: its ``lock_token`` is ``""`` (so settling
        it raises ``MessageLockLost``) and ``locked_until`` is the current lock's expiry if another
        receiver holds one, else ``NOT_LOCKED``.
        """
        if max_messages < 1:
            raise ValueError("max_messages must be at least 1")
        conn = self._connection()
        config, dead_lettered = self._entity(conn, queue)
        now = format_ts(self._now())
        rows = conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE queue = ? AND dead_lettered = ?"
            " ORDER BY sequence_number LIMIT ?",
            (config.name, int(dead_lettered), max_messages),
        ).fetchall()
        return [
            _message(
                row,
                delivery_count=row["delivery_count"],
                lock_token="",
                locked_until=parse_ts(row["locked_until"])
                if row["locked_until"] is not None and row["locked_until"] > now
                else NOT_LOCKED,
            )
            for row in rows
        ]

    def counts(self, queue: str) -> dict[str, int]:
        """Disjoint counts: ``active`` is receivable now, ``locked`` is held by a receiver,
        ``scheduled`` waits for its enqueue time, ``dead_letter`` is the dead-letter sub-queue.

        A dead-letter path counts the queue it belongs to.
        """
        conn = self._connection()
        config, _ = self._entity(conn, queue)
        row = conn.execute(
            "SELECT"
            " COALESCE(SUM(dead_lettered = 0 AND visible_at <= :now), 0) AS active,"
            " COALESCE(SUM(dead_lettered = 0 AND visible_at > :now"
            "   AND (locked_until IS NULL OR locked_until <= :now)), 0) AS scheduled,"
            " COALESCE(SUM(dead_lettered = 0 AND locked_until > :now), 0) AS locked,"
            " COALESCE(SUM(dead_lettered = 1), 0) AS dead_letter"
            " FROM messages WHERE queue = :queue",
            {"now": format_ts(self._now()), "queue": config.name},
        ).fetchone()
        return {key: int(row[key]) for key in ("active", "scheduled", "locked", "dead_letter")}

    def active_count(self, queue: str) -> int:
        """Messages a receiver could take now, as Service Bus's activeMessageCount; no lock taken."""
        conn = self._connection()
        config, dead_lettered = self._entity(conn, queue)
        row = conn.execute(
            "SELECT COUNT(*) FROM messages WHERE queue = ? AND dead_lettered = ? AND visible_at <= ?",
            (config.name, int(dead_lettered), format_ts(self._now())),
        ).fetchone()
        return int(row[0])

    def next_due(self) -> datetime | None:
        """The earliest future moment at which a message becomes receivable, in any queue, or
        one expires: a host on a virtual clock stops there, and its triggers' next receive moves
        the message to the dead-letter queue at that moment, not at some later jump."""
        now = format_ts(self._now())
        conn = self._connection()
        visible = conn.execute("SELECT MIN(visible_at) FROM messages WHERE visible_at > ?", (now,)).fetchone()
        expiring = conn.execute(
            "SELECT MIN(expires_at) FROM messages WHERE dead_lettered = 0 AND expires_at > ?", (now,)
        ).fetchone()
        due = [parse_ts(value) for value in (visible[0], expiring[0]) if value is not None]
        return min(due) if due else None


def check_queue(config: QueueConfig) -> None:
    """A queue's properties against Service Bus's bounds (``limits``). The lock duration is held
    to the documented maximum only: the 5-second floor is the portal's, and the data plane takes
    less (harness/standins/amqp_broker/limits.py has the sources)."""
    problems = [
        limits.outside(limits.MAX_DELIVERY_COUNT, config.max_delivery_count),
        None
        if config.default_message_ttl is None
        else limits.outside(limits.DEFAULT_MESSAGE_TTL, config.default_message_ttl),
        None
        if config.lock_duration <= limits.duration_bounds(limits.LOCK_DURATION)[1]
        else limits.outside(limits.LOCK_DURATION, config.lock_duration),
        None
        if config.duplicate_detection_window is None
        else limits.outside(limits.DUPLICATE_DETECTION_WINDOW, config.duplicate_detection_window),
    ]
    found = [p for p in problems if p is not None]
    if found:
        raise ValueError(f"queue {config.name!r}: {'; '.join(found)}")


# Application property values Service Bus carries: AMQP simple types, not maps or lists (AMQP
# 1.0, 3.2.5 application-properties: "restricted to be of simple types only").
_SIMPLE = (str, int, float, bool, bytes, datetime, uuid.UUID, type(None))


def check_message(body: bytes, ids: Mapping[str, str | None], properties: Mapping[str, Any]) -> None:
    """Refuse a message Service Bus refuses, with the error the SDK raises for it: ValueError for
    an empty MessageId or one over 128 characters (the SDK checks it itself; CorrelationId,
    Subject and ReplyTo have no documented length, only the header's), MessageSizeExceededError
    for the header or the whole message over the Standard tier's size, ServiceBusError for one
    property over 32 KB (``limits`` has the sources)."""
    message_id = ids.get("message_id")
    if message_id is not None and not message_id:
        raise ValueError("message_id cannot be empty.")
    if message_id is not None and len(message_id) > limits.most(limits.ID_LENGTH):
        raise ValueError(f"message_id cannot be longer than {limits.ID_LENGTH.high} characters.")
    sizes: dict[str, int] = {}
    for key, value in properties.items():
        if not isinstance(value, _SIMPLE):
            raise ValueError(
                f"application property {key!r}: a {type(value).__name__} is not a type Service Bus "
                "carries (strings, numbers, booleans, bytes, times, UUIDs)"
            )
        sizes[str(key)] = len(str(key).encode()) + len(str(value).encode())
    # The header first, as the service answers: a property over 32 KB in a header over 64 KB is
    # a size error.
    header = sum(len((v or "").encode()) for v in ids.values()) + sum(sizes.values())
    if header > limits.most(limits.HEADER_SIZE):
        raise MessageSizeExceededError(
            message=f"The size quota for the message header ({limits.most(limits.HEADER_SIZE)}) "
            f"has been exceeded. (header: {header} bytes)"
        )
    for key, size in sizes.items():
        if size > limits.most(limits.PROPERTY_SIZE):
            raise ServiceBusError(
                "The service was unable to process the request; please retry the operation. "
                f"(application property {key!r}: {size} bytes; "
                f"the most is {limits.most(limits.PROPERTY_SIZE)})"
            )
    total = header + len(body)
    if total > limits.most(limits.MESSAGE_SIZE_STANDARD):
        raise MessageSizeExceededError(
            message=f"The received message (size:{total} bytes) exceeds the limit "
            f"({limits.MESSAGE_SIZE_STANDARD.high} bytes) currently allowed on the link."
        )


def check_dead_letter(reason: str, description: str | None) -> None:
    """Refuse a dead-letter reason or description longer than Microsoft's SDKs send, before the
    message's lock is touched, as they refuse it (``limits.DEAD_LETTER_TEXT_LENGTH``)."""
    for name, text in (("reason", reason), ("error_description", description)):
        if text is not None and len(text) > limits.most(limits.DEAD_LETTER_TEXT_LENGTH):
            raise ValueError(
                f"{name} cannot be longer than {limits.DEAD_LETTER_TEXT_LENGTH.high} characters "
                f"({len(text)}; {limits.DEAD_LETTER_TEXT_LENGTH.source})."
            )


def _max_delivery_description(config: QueueConfig) -> str:
    return f"Message could not be consumed after {config.max_delivery_count} delivery attempts."
