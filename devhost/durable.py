"""Durable Functions for devhost: instances, history, inboxes, timers and activity work in SQLite.

Orchestrators are replayed by the Durable SDK inside the Functions worker, on real history JSON;
this module only plays the part of the Durable extension: it keeps the history, turns the
actions an episode returns into work (activities, timers), and delivers results back as history
events. Episodes replayed together are committed in one transaction after their orchestrators
return, and activity results that finish together in another, so a ``kill -9`` at any point
loses nothing committed: on restart, unfinished work simply runs again (activities are
at-least-once, as in Azure).
"""

import asyncio
import functools
import json
import sqlite3
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any

from devhost.clock import Clock
from devhost.servicebus import format_time
from devhost.servicebus import parse_time as parse_ts

# One transaction stamps many rows with the same moment: format each moment once.
ts = functools.lru_cache(maxsize=256)(format_time)

OUT_OF_PROC_MARKER = "$OutOfProcData$:"
ACTIVITY_LEASE = timedelta(minutes=10)

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
CREATE TABLE IF NOT EXISTS schedules (
    function_name TEXT PRIMARY KEY,
    last_fired    TEXT NOT NULL
);
"""


class EventType(IntEnum):
    EXECUTION_STARTED = 0
    EXECUTION_COMPLETED = 1
    EXECUTION_TERMINATED = 3
    TASK_SCHEDULED = 4
    TASK_COMPLETED = 5
    TASK_FAILED = 6
    TIMER_CREATED = 10
    TIMER_FIRED = 11
    ORCHESTRATOR_STARTED = 12
    ORCHESTRATOR_COMPLETED = 13
    EVENT_RAISED = 15


class ActionType(IntEnum):
    CALL_ACTIVITY = 0
    CALL_ACTIVITY_WITH_RETRY = 1
    CALL_SUB_ORCHESTRATOR = 2
    CALL_SUB_ORCHESTRATOR_WITH_RETRY = 3
    CONTINUE_AS_NEW = 4
    CREATE_TIMER = 5
    WAIT_FOR_EXTERNAL_EVENT = 6
    CALL_ENTITY = 7
    CALL_HTTP = 8
    SIGNAL_ENTITY = 9
    WHEN_ANY = 11
    WHEN_ALL = 12


class RuntimeStatus(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    TERMINATED = "Terminated"


FINISHED = frozenset({RuntimeStatus.COMPLETED, RuntimeStatus.FAILED, RuntimeStatus.TERMINATED})


class UnknownOrchestrator(Exception):
    pass


class InstanceExists(Exception):
    pass


class Queued(StrEnum):
    EVENTS = "events"
    ACTIVITIES = "activities"


class Delivery(StrEnum):
    ACCEPTED = "accepted"
    NOT_FOUND = "not-found"
    GONE = "gone"


@dataclass(frozen=True)
class ActivityWork:
    id: int
    instance_id: str
    execution_id: str
    task_id: int
    name: str
    input: str | None


@dataclass(frozen=True)
class ActivityOutcome:
    """An activity's JSON result, or its failure as (reason, details)."""

    work: ActivityWork
    result: str | None = None
    failure: tuple[str, str] | None = None


def _event(kind: EventType, when: datetime, **fields: Any) -> dict[str, Any]:
    return {"EventType": int(kind), "EventId": -1, "IsPlayed": False, "Timestamp": ts(when), **fields}


def _flatten(actions: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for action in actions:
        if action.get("actionType") in (ActionType.WHEN_ANY, ActionType.WHEN_ALL):
            yield from _flatten(action.get("compoundActions", []))
        else:
            yield action


def split_orchestrator_error(text: str) -> tuple[str, dict[str, Any] | None]:
    """An orchestrator that raises comes back with the state JSON after a marker in its message."""
    if OUT_OF_PROC_MARKER not in text:
        return text, None
    message, _, state = text.partition(OUT_OF_PROC_MARKER)
    return message.strip(), json.loads(state)


def context_fields(instance_id: str, input_json: str | None, *, is_replaying: bool) -> dict[str, Any]:
    """The out-of-proc orchestration context the Durable extension sends, but for its history."""
    return {
        "instanceId": instance_id,
        "isReplaying": is_replaying,
        "parentInstanceId": None,
        "input": input_json,
        "upperSchemaVersion": 2,
        "upperSchemaVersionNew": 3,
        # The Azure Storage provider's limits: timers up to 6 days are single timers.
        "maximumShortTimerDuration": "6.00:00:00",
        "longRunningTimerIntervalDuration": "3.00:00:00",
    }


def orchestration_context(history: list[str], fields: dict[str, Any]) -> str:
    """The context JSON, its history spliced in as the events' JSON texts (not parsed again)."""
    return '{"history": [' + ", ".join(history) + "], " + json.dumps(fields)[1:]


_UNPLAYED = '"IsPlayed": false'
_PLAYED = '"IsPlayed": true'
# Events are written with EventType first (``_event``), so the ones a replay's actions are
# checked against can be picked out of the history without parsing it.
_SCHEDULING = tuple(
    f'{{"EventType": {int(kind)},' for kind in (EventType.TASK_SCHEDULED, EventType.TIMER_CREATED)
)


class DurableStore:
    """Owns the durable SQLite file. Used from the host's event-loop thread only."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self.conn.execute("PRAGMA journal_mode=WAL")
        # WAL with synchronous=NORMAL: a commit is in the WAL before it returns, so a killed
        # process loses nothing committed; only an OS crash or power cut can lose the last few.
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(SCHEMA)
        self._lock = threading.RLock()

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


# Runs the named orchestrator function on a context JSON and returns its state JSON, or raises
# OrchestratorFailed with the failure's message (devhost runs it through the worker).
RunOrchestrator = Callable[[str, str, dict[str, Any]], Awaitable[str]]


class OrchestratorFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class EpisodeConflict(Exception):
    pass


@dataclass(frozen=True)
class Episode:
    """An orchestrator run in the making: what it replays, and the inbox rows it consumes."""

    instance_id: str
    name: str
    execution_id: str
    inbox_ids: tuple[int, ...]
    played: int  # events already in the history
    scheduled: list[dict[str, Any]]  # its activities and timers, which the replay must ask for again
    events: list[dict[str, Any]]
    now: datetime
    context: str
    fields: dict[str, Any]


class DurableEngine:
    """The part of the Durable extension devhost needs: start, events, replay, timers, activities."""

    def __init__(
        self,
        store: DurableStore,
        clock: Clock,
        orchestrators: frozenset[str],
        run_orchestrator: RunOrchestrator | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.orchestrators = orchestrators
        self.run_orchestrator = run_orchestrator or _no_orchestrators
        self._leases: dict[int, datetime] = {}
        # Called after a commit that queued an event (an orchestration to run) or, from an
        # episode, activities: a host's loops wake on it rather than poll.
        self.changed: Callable[[Queued], None] = lambda queued: None

    # --- client operations (the Durable HTTP API calls these) ---------------------------------

    def start(self, name: str, instance_id: str | None, input_json: str | None) -> str:
        if name not in self.orchestrators:
            raise UnknownOrchestrator(
                f"The function '{name}' doesn't exist, is disabled, or is not an orchestrator function. "
                f"Known orchestrators: {', '.join(sorted(self.orchestrators)) or 'none'}"
            )
        instance_id = instance_id or uuid.uuid4().hex
        now = self.clock.now()
        execution_id = uuid.uuid4().hex
        with self.store.tx() as conn:
            row = conn.execute(
                "SELECT status FROM instances WHERE instance_id = ?", (instance_id,)
            ).fetchone()
            if row is not None and RuntimeStatus(row[0]) not in FINISHED:
                raise InstanceExists(
                    f"An Orchestration instance with the status {row[0]} already exists: {instance_id}"
                )
            if row is not None:
                self._forget(conn, instance_id)
            conn.execute(
                "INSERT INTO instances (instance_id, name, execution_id, status, input, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (instance_id, name, execution_id, RuntimeStatus.PENDING, input_json, ts(now), ts(now)),
            )
            self._start_execution(
                conn, instance_id, execution_id=execution_id, name=name, input_json=input_json, now=now
            )
        self.changed(Queued.EVENTS)
        return instance_id

    def raise_event(self, instance_id: str, name: str, input_json: str | None) -> Delivery:
        now = self.clock.now()
        with self.store.tx() as conn:
            row = conn.execute(
                "SELECT status, execution_id, completing FROM instances WHERE instance_id = ?",
                (instance_id,),
            ).fetchone()
            if row is None:
                return Delivery.NOT_FOUND
            if RuntimeStatus(row[0]) in FINISHED or row[2]:
                return Delivery.GONE
            event = _event(EventType.EVENT_RAISED, now, Name=name, Input=input_json)
            self._deliver(conn, instance_id, row[1], event, now)
        self.changed(Queued.EVENTS)
        return Delivery.ACCEPTED

    def terminate(self, instance_id: str, reason: str) -> Delivery:
        now = self.clock.now()
        with self.store.tx() as conn:
            row = conn.execute(
                "SELECT status FROM instances WHERE instance_id = ?", (instance_id,)
            ).fetchone()
            if row is None:
                return Delivery.NOT_FOUND
            if RuntimeStatus(row[0]) in FINISHED:
                return Delivery.GONE
            self._drop_work(conn, instance_id)
            self._finish(conn, instance_id, RuntimeStatus.TERMINATED, json.dumps(reason), now)
        return Delivery.ACCEPTED

    def purge(self, instance_id: str) -> int:
        with self.store.tx() as conn:
            row = conn.execute(
                "SELECT status FROM instances WHERE instance_id = ?", (instance_id,)
            ).fetchone()
            if row is None or RuntimeStatus(row[0]) not in FINISHED:
                return 0
            self._forget(conn, instance_id)
        return 1

    def status(
        self, instance_id: str, *, show_history: bool = False, show_input: bool = True
    ) -> dict[str, Any] | None:
        row = self.store.conn.execute(
            "SELECT instance_id, name, status, input, output, custom_status, created_at, updated_at"
            " FROM instances WHERE instance_id = ?",
            (instance_id,),
        ).fetchone()
        if row is None:
            return None
        status = self._status_json(row, show_input)
        if show_history:
            status["history"] = self.history(instance_id)
        return status

    def list_instances(
        self, statuses: set[str] | None = None, prefix: str | None = None
    ) -> list[dict[str, Any]]:
        rows = self.store.conn.execute(
            "SELECT instance_id, name, status, input, output, custom_status, created_at, updated_at"
            " FROM instances ORDER BY created_at, instance_id"
        ).fetchall()
        return [
            self._status_json(row, True)
            for row in rows
            if (not statuses or row[2] in statuses) and (not prefix or row[0].startswith(prefix))
        ]

    def history(self, instance_id: str) -> list[dict[str, Any]]:
        rows = self.store.conn.execute(
            "SELECT event FROM history WHERE instance_id = ? ORDER BY seq", (instance_id,)
        ).fetchall()
        return [json.loads(r[0]) for r in rows]

    @staticmethod
    def _status_json(row: tuple[Any, ...], show_input: bool) -> dict[str, Any]:
        instance_id, name, status, input_json, output, custom_status, created, updated = row
        return {
            "name": name,
            "instanceId": instance_id,
            "runtimeStatus": status,
            "input": json.loads(input_json) if show_input and input_json else None,
            "output": json.loads(output) if output else None,
            "customStatus": json.loads(custom_status) if custom_status else None,
            "createdTime": created,
            "lastUpdatedTime": updated,
        }

    # --- work ------------------------------------------------------------------------------------

    def next_due(self) -> datetime | None:
        """When the next timer becomes visible: a virtual clock jumps there when the host is idle."""
        row = self.store.conn.execute(
            "SELECT MIN(visible_at) FROM inbox WHERE visible_at > ?", (ts(self.clock.now()),)
        ).fetchone()
        return parse_ts(row[0]) if row and row[0] else None

    def ready_instances(self, limit: int = 100) -> list[str]:
        rows = self.store.conn.execute(
            "SELECT instance_id, MIN(id) AS first FROM inbox WHERE visible_at <= ?"
            " GROUP BY instance_id ORDER BY first LIMIT ?",
            (ts(self.clock.now()), limit),
        ).fetchall()
        return [r[0] for r in rows]

    async def run_episodes(self, instance_ids: list[str]) -> None:
        """Replay each orchestrator over its history plus its new events, all at once, and commit
        what they asked for in one transaction (one fsync for the batch, not one per instance).

        The events are taken when the episodes are committed, after the orchestrators ran, so a
        crash while they run loses nothing: the next start replays the same episodes.
        """
        episodes = [e for e in map(self._begin_episode, instance_ids) if e is not None]
        if not episodes:
            return
        outcomes = await asyncio.gather(*(self._replay(episode) for episode in episodes))
        with self.store.tx() as conn:
            for episode, (state, error) in zip(episodes, outcomes, strict=True):
                self._end_episode(conn, episode, state, error)
        self.changed(Queued.ACTIVITIES)

    async def _replay(self, episode: "Episode") -> tuple[dict[str, Any] | None, str | None]:
        if episode.name not in self.orchestrators:
            return None, f"orchestrator function '{episode.name}' is no longer in the app"
        try:
            return json.loads(
                await self.run_orchestrator(episode.name, episode.context, episode.fields)
            ), None
        except OrchestratorFailed as raised:
            error, state = split_orchestrator_error(raised.message)
            return state, error

    def _begin_episode(self, instance_id: str) -> "Episode | None":
        # Reads only: this host is the one writer (a file lock), and the episode's own writes
        # wait for its end. A write transaction here only for messages nothing will replay.
        now = self.clock.now()
        conn = self.store.conn
        row = conn.execute(
            "SELECT name, execution_id, status, completing, input FROM instances WHERE instance_id = ?",
            (instance_id,),
        ).fetchone()
        messages = conn.execute(
            # In the order they became visible: a reply raised before a timer's FireAt comes
            # before the TimerFired, even if the episode runs after both.
            "SELECT id, execution_id, event FROM inbox WHERE instance_id = ? AND visible_at <= ?"
            " ORDER BY visible_at, id",
            (instance_id, ts(now)),
        ).fetchall()
        finished = row is None or RuntimeStatus(row[2]) in FINISHED
        new_events = [] if finished else [json.loads(m[2]) for m in messages if m[1] == row[1]]
        if finished or not new_events or row[3]:
            with self.store.tx() as tx:
                tx.executemany("DELETE FROM inbox WHERE id = ?", [(m[0],) for m in messages])
                if not finished and new_events:
                    # The orchestrator already returned; it only waited for its uncancelled timers.
                    self._complete_if_no_timers(tx, instance_id, now)
            return None
        name, execution_id = str(row[0]), str(row[1])
        rows = conn.execute("SELECT event FROM history WHERE instance_id = ? ORDER BY seq", (instance_id,))
        # Stored events were new when written; to this replay they are played. The flag is the
        # third key of every event (``_event``), so a plain replace touches nothing inside inputs.
        played = [str(r[0]).replace(_UNPLAYED, _PLAYED, 1) for r in rows]
        events = [_event(EventType.ORCHESTRATOR_STARTED, now), *new_events]
        fields = context_fields(instance_id, row[4], is_replaying=bool(played))
        return Episode(
            instance_id=instance_id,
            name=name,
            execution_id=execution_id,
            inbox_ids=tuple(int(m[0]) for m in messages),
            played=len(played),
            scheduled=[json.loads(text) for text in played if text.startswith(_SCHEDULING)],
            events=events,
            now=now,
            context=orchestration_context(played + [json.dumps(e) for e in events], fields),
            fields=fields,
        )

    def _end_episode(
        self,
        conn: sqlite3.Connection,
        episode: "Episode",
        state: dict[str, Any] | None,
        error: str | None,
    ) -> None:
        instance_id, now = episode.instance_id, episode.now
        current = conn.execute(
            "SELECT execution_id, status FROM instances WHERE instance_id = ?", (instance_id,)
        ).fetchone()
        if current is None or current[0] != episode.execution_id or RuntimeStatus(current[1]) in FINISHED:
            return  # terminated, purged or restarted while the orchestrator ran: its events went with it
        taken = sum(
            conn.execute("DELETE FROM inbox WHERE id = ?", (inbox_id,)).rowcount
            for inbox_id in episode.inbox_ids
        )
        if taken != len(episode.inbox_ids):
            raise EpisodeConflict(f"the inbox of {instance_id} changed under a running episode")
        events = list(episode.events)
        outcome = self._apply_actions(
            conn,
            instance_id=instance_id,
            execution_id=episode.execution_id,
            state=state,
            scheduled=episode.scheduled,
            episode=events,
            now=now,
        )
        if outcome is not None and error is None:
            error = outcome
        events.append(_event(EventType.ORCHESTRATOR_COMPLETED, now))
        first_seq = episode.played
        conn.executemany(
            "INSERT INTO history (instance_id, seq, event) VALUES (?, ?, ?)",
            [(instance_id, first_seq + i, json.dumps(e)) for i, e in enumerate(events)],
        )
        custom = None if state is None else state.get("customStatus")
        conn.execute(
            "UPDATE instances SET status = ?, custom_status = ?, updated_at = ? WHERE instance_id = ?",
            (RuntimeStatus.RUNNING, None if custom is None else json.dumps(custom), ts(now), instance_id),
        )
        if error is not None:
            self._drop_work(conn, instance_id)
            self._finish(conn, instance_id, RuntimeStatus.FAILED, json.dumps(error), now)
        elif state is not None and state.get("isDone"):
            self._on_done(conn, instance_id, state, now)

    def _apply_actions(
        self,
        conn: sqlite3.Connection,
        *,
        instance_id: str,
        execution_id: str,
        state: dict[str, Any] | None,
        scheduled: list[dict[str, Any]],
        episode: list[dict[str, Any]],
        now: datetime,
    ) -> str | None:
        """Schedule new activities and timers, cancel timers; return an error for the instance, if any."""
        if state is None:
            return None
        groups = state.get("actions") or []
        sequence = 0
        for action in _flatten([a for group in groups for a in group]):
            kind = action.get("actionType")
            if kind in (ActionType.WAIT_FOR_EXTERNAL_EVENT, ActionType.CONTINUE_AS_NEW):
                continue
            if kind not in (ActionType.CALL_ACTIVITY, ActionType.CREATE_TIMER):
                known = {int(a): a.name for a in ActionType}
                label = known.get(int(kind or -1), kind)
                return f"devhost does not support the orchestrator action {label}"
            task_id = sequence
            sequence += 1
            if task_id < len(scheduled):
                past = scheduled[task_id]
                if not self._same_action(past, action):
                    return (
                        f"Non-deterministic workflow detected: task {task_id} was "
                        f"{json.dumps(past.get('Name') or 'a timer')} in the history but the "
                        f"orchestrator now asks for {json.dumps(action.get('functionName') or 'a timer')}"
                    )
                if kind == ActionType.CREATE_TIMER and action.get("isCanceled"):
                    conn.execute(
                        "DELETE FROM inbox WHERE instance_id = ? AND timer_id = ?", (instance_id, task_id)
                    )
                continue
            if kind == ActionType.CALL_ACTIVITY:
                episode.append(
                    _event(EventType.TASK_SCHEDULED, now, EventId=task_id, Name=action["functionName"])
                )
                conn.execute(
                    "INSERT INTO activities (instance_id, execution_id, task_id, name, input)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (instance_id, execution_id, task_id, action["functionName"], action.get("input")),
                )
            else:
                fire_at = action["fireAt"]
                episode.append(_event(EventType.TIMER_CREATED, now, EventId=task_id, FireAt=fire_at))
                if not action.get("isCanceled"):
                    fired = _event(EventType.TIMER_FIRED, now, TimerId=task_id, FireAt=fire_at)
                    conn.execute(
                        "INSERT INTO inbox (instance_id, execution_id, timer_id, visible_at, event)"
                        " VALUES (?, ?, ?, ?, ?)",
                        (instance_id, execution_id, task_id, ts(_parse_fire_at(fire_at)), json.dumps(fired)),
                    )
        return None

    @staticmethod
    def _same_action(past: dict[str, Any], action: dict[str, Any]) -> bool:
        if action.get("actionType") == ActionType.CALL_ACTIVITY:
            same_name = past.get("Name") == action.get("functionName")
            return bool(past["EventType"] == EventType.TASK_SCHEDULED and same_name)
        return bool(past["EventType"] == EventType.TIMER_CREATED)

    def _on_done(
        self, conn: sqlite3.Connection, instance_id: str, state: dict[str, Any], now: datetime
    ) -> None:
        groups = state.get("actions") or []
        restart = next(
            (
                a
                for a in _flatten([a for g in groups for a in g])
                if a.get("actionType") == ActionType.CONTINUE_AS_NEW
            ),
            None,
        )
        if restart is not None:
            self._continue_as_new(conn, instance_id, restart.get("input"), now)
            return
        conn.execute(
            "UPDATE instances SET output = ?, completing = 1 WHERE instance_id = ?",
            (json.dumps(state.get("output")), instance_id),
        )
        self._complete_if_no_timers(conn, instance_id, now)

    def _complete_if_no_timers(self, conn: sqlite3.Connection, instance_id: str, now: datetime) -> None:
        # An uncancelled durable timer keeps the instance running until it fires (as in Azure).
        pending = conn.execute(
            "SELECT COUNT(*) FROM inbox WHERE instance_id = ? AND timer_id IS NOT NULL", (instance_id,)
        ).fetchone()[0]
        if pending:
            return
        output = conn.execute(
            "SELECT output FROM instances WHERE instance_id = ?", (instance_id,)
        ).fetchone()[0]
        self._drop_work(conn, instance_id)
        self._finish(conn, instance_id, RuntimeStatus.COMPLETED, output, now)

    def _continue_as_new(
        self, conn: sqlite3.Connection, instance_id: str, input_json: str | None, now: datetime
    ) -> None:
        name = conn.execute("SELECT name FROM instances WHERE instance_id = ?", (instance_id,)).fetchone()[0]
        execution_id = uuid.uuid4().hex
        self._drop_work(conn, instance_id)
        conn.execute("DELETE FROM history WHERE instance_id = ?", (instance_id,))
        conn.execute(
            "UPDATE instances SET execution_id = ?, input = ?, status = ?, completing = 0, updated_at = ?"
            " WHERE instance_id = ?",
            (execution_id, input_json, RuntimeStatus.RUNNING, ts(now), instance_id),
        )
        self._start_execution(
            conn, instance_id, execution_id=execution_id, name=name, input_json=input_json, now=now
        )

    def _finish(
        self,
        conn: sqlite3.Connection,
        instance_id: str,
        status: RuntimeStatus,
        output: str | None,
        now: datetime,
    ) -> None:
        conn.execute(
            "UPDATE instances SET status = ?, output = ?, completing = 0, updated_at = ?"
            " WHERE instance_id = ?",
            (status, output, ts(now), instance_id),
        )

    def _start_execution(
        self,
        conn: sqlite3.Connection,
        instance_id: str,
        *,
        execution_id: str,
        name: str,
        input_json: str | None,
        now: datetime,
    ) -> None:
        started = _event(
            EventType.EXECUTION_STARTED,
            now,
            Name=name,
            Input=input_json,
            Version="",
            OrchestrationInstance={"InstanceId": instance_id, "ExecutionId": execution_id},
        )
        self._deliver(conn, instance_id, execution_id, started, now)

    @staticmethod
    def _deliver(
        conn: sqlite3.Connection, instance_id: str, execution_id: str, event: dict[str, Any], now: datetime
    ) -> None:
        conn.execute(
            "INSERT INTO inbox (instance_id, execution_id, visible_at, event) VALUES (?, ?, ?, ?)",
            (instance_id, execution_id, ts(now), json.dumps(event)),
        )

    @staticmethod
    def _drop_work(conn: sqlite3.Connection, instance_id: str) -> None:
        conn.execute("DELETE FROM inbox WHERE instance_id = ?", (instance_id,))
        conn.execute("DELETE FROM activities WHERE instance_id = ?", (instance_id,))

    def _forget(self, conn: sqlite3.Connection, instance_id: str) -> None:
        self._drop_work(conn, instance_id)
        conn.execute("DELETE FROM history WHERE instance_id = ?", (instance_id,))
        conn.execute("DELETE FROM instances WHERE instance_id = ?", (instance_id,))

    # --- activities --------------------------------------------------------------------------

    def release_activity_leases(self) -> None:
        """At start-up: whoever held these leases died with the previous process."""
        self._leases.clear()

    def claim_activities(self, limit: int) -> list[ActivityWork]:
        """Lease up to ``limit`` activities. The leases live in this process, which alone owns the
        data directory: a claim writes nothing, and a restart (a new process) finds every
        unfinished activity free again, so each runs at least once."""
        now = self.clock.now()
        expired = [work_id for work_id, until in self._leases.items() if until <= now]
        for work_id in expired:
            del self._leases[work_id]
        rows = self.store.conn.execute(
            "SELECT id, instance_id, execution_id, task_id, name, input FROM activities ORDER BY id LIMIT ?",
            (limit + len(self._leases),),
        ).fetchall()
        claimed = [ActivityWork(*row) for row in rows if row[0] not in self._leases][:limit]
        for work in claimed:
            self._leases[work.id] = now + ACTIVITY_LEASE
        return claimed

    def finish_activities(self, outcomes: list["ActivityOutcome"]) -> None:
        """Deliver activities' results, in one transaction; a result whose instance was
        terminated or restarted meanwhile is dropped."""
        if not outcomes:
            return
        now = self.clock.now()
        with self.store.tx() as conn:
            for outcome in outcomes:
                work = outcome.work
                self._leases.pop(work.id, None)
                if conn.execute("DELETE FROM activities WHERE id = ?", (work.id,)).rowcount == 0:
                    continue
                if outcome.failure is None:
                    event = _event(
                        EventType.TASK_COMPLETED, now, TaskScheduledId=work.task_id, Result=outcome.result
                    )
                else:
                    reason, details = outcome.failure
                    event = _event(
                        EventType.TASK_FAILED,
                        now,
                        TaskScheduledId=work.task_id,
                        Reason=reason,
                        Details=details,
                    )
                self._deliver(conn, work.instance_id, work.execution_id, event, now)
        self.changed(Queued.EVENTS)

    def pending_activities(self) -> int:
        return int(self.store.conn.execute("SELECT COUNT(*) FROM activities").fetchone()[0])


async def _no_orchestrators(name: str, context: str, fields: dict[str, Any]) -> str:
    raise OrchestratorFailed(f"this engine runs no orchestrators (asked for {name})")


def _parse_fire_at(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
