"""Durable Functions for devhost: the part of the Durable extension that schedules the work.

Orchestrators are replayed by the Durable SDK inside the Functions worker, on real history JSON
(``devhost.durable_wire``); the engine only plays the part of the Durable extension: it keeps the
history (``devhost.durable_store``), turns the actions an episode returns into work (activities,
timers), and delivers results back as history events. Episodes replayed together are committed
in one transaction after their orchestrators return, and activity results that finish together
in another, so a ``kill -9`` at any point loses nothing committed: on restart, unfinished work
simply runs again (activities are at-least-once, as in Azure).
"""

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from devhost.durable_store import ActivityWork, DurableStore, Instance, StoreTx
from devhost.durable_wire import (
    FINISHED,
    ActionType,
    EventType,
    RuntimeStatus,
    as_played,
    context_fields,
    event_text,
    flatten_actions,
    is_scheduling,
    new_event,
    orchestration_context,
    parse_fire_at,
    split_orchestrator_error,
)

ACTIVITY_LEASE = timedelta(minutes=10)


class Clock(Protocol):
    """Whatever tells the engine the time: the host's clock, virtual in tests."""

    def now(self) -> datetime: ...


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
class ActivityOutcome:
    """An activity's JSON result, or its failure as (reason, details)."""

    work: ActivityWork
    result: str | None = None
    failure: tuple[str, str] | None = None


# Runs the named orchestrator function on a context JSON and returns its state JSON, or raises
# OrchestratorFailed with the failure's message (the host runs it through the worker; the
# message may carry the state JSON after OUT_OF_PROC_MARKER).
RunOrchestrator = Callable[[str, str, dict[str, Any]], Awaitable[str]]


class OrchestratorFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class EpisodeConflict(Exception):
    pass


class EpisodeAbandoned(Exception):
    """The orchestrator could not run (its worker process died): the episode is left as it was,
    its events still in the inbox, and replayed later, as the extension abandons a work item."""


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
        with self.store.tx() as tx:
            existing = tx.instance(instance_id)
            if existing is not None and existing.status not in FINISHED:
                raise InstanceExists(
                    f"An Orchestration instance with the status {existing.status} already exists: "
                    f"{instance_id}"
                )
            if existing is not None:
                tx.forget(instance_id)
            tx.insert_instance(
                instance_id, name=name, execution_id=execution_id, input_json=input_json, now=now
            )
            self._start_execution(
                tx, instance_id, execution_id=execution_id, name=name, input_json=input_json, now=now
            )
        self.changed(Queued.EVENTS)
        return instance_id

    def raise_event(self, instance_id: str, name: str, input_json: str | None) -> Delivery:
        now = self.clock.now()
        with self.store.tx() as tx:
            instance = tx.instance(instance_id)
            if instance is None:
                return Delivery.NOT_FOUND
            if instance.status in FINISHED or instance.completing:
                return Delivery.GONE
            event = new_event(EventType.EVENT_RAISED, now, Name=name, Input=input_json)
            tx.deliver(instance_id, instance.execution_id, event_text(event), now)
        self.changed(Queued.EVENTS)
        return Delivery.ACCEPTED

    def terminate(self, instance_id: str, reason: str) -> Delivery:
        now = self.clock.now()
        with self.store.tx() as tx:
            instance = tx.instance(instance_id)
            if instance is None:
                return Delivery.NOT_FOUND
            if instance.status in FINISHED:
                return Delivery.GONE
            tx.drop_work(instance_id)
            tx.finish(instance_id, RuntimeStatus.TERMINATED, json.dumps(reason), now)
        return Delivery.ACCEPTED

    def purge(self, instance_id: str) -> int:
        with self.store.tx() as tx:
            instance = tx.instance(instance_id)
            if instance is None or instance.status not in FINISHED:
                return 0
            tx.forget(instance_id)
        return 1

    def status(
        self, instance_id: str, *, show_history: bool = False, show_input: bool = True
    ) -> dict[str, Any] | None:
        instance = self.store.instance(instance_id)
        if instance is None:
            return None
        status = _status_json(instance, show_input)
        if show_history:
            status["history"] = self.history(instance_id)
        return status

    def list_instances(
        self, statuses: set[str] | None = None, prefix: str | None = None
    ) -> list[dict[str, Any]]:
        return [
            _status_json(instance, True)
            for instance in self.store.instances()
            if (not statuses or instance.status in statuses)
            and (not prefix or instance.instance_id.startswith(prefix))
        ]

    def history(self, instance_id: str) -> list[dict[str, Any]]:
        return [json.loads(text) for text in self.store.history(instance_id)]

    # --- work ------------------------------------------------------------------------------------

    def next_due(self) -> datetime | None:
        """When the next timer becomes visible: a virtual clock jumps there when the host is idle."""
        return self.store.next_visible(self.clock.now())

    def ready_instances(self, limit: int = 100) -> list[str]:
        return self.store.ready_instances(self.clock.now(), limit)

    async def run_episodes(self, instance_ids: list[str]) -> None:
        """Replay each orchestrator over its history plus its new events, all at once, and commit
        what they asked for in one transaction (one fsync for the batch, not one per instance).

        The events are taken when the episodes are committed, after the orchestrators ran, so a
        crash while they run loses nothing: the next start replays the same episodes.
        """
        episodes = [e for e in map(self._begin_episode, instance_ids) if e is not None]
        if not episodes:
            return
        replayed = await asyncio.gather(*(self._replay(episode) for episode in episodes))
        with self.store.tx() as tx:
            for episode, outcome in zip(episodes, replayed, strict=True):
                if outcome is not None:
                    self._end_episode(tx, episode, *outcome)
        self.changed(Queued.ACTIVITIES)

    async def _replay(self, episode: Episode) -> tuple[dict[str, Any] | None, str | None] | None:
        """The orchestrator's state and error; None for an episode abandoned, to run again."""
        if episode.name not in self.orchestrators:
            return None, f"orchestrator function '{episode.name}' is no longer in the app"
        try:
            return json.loads(
                await self.run_orchestrator(episode.name, episode.context, episode.fields)
            ), None
        except OrchestratorFailed as raised:
            error, state = split_orchestrator_error(raised.message)
            return state, error
        except EpisodeAbandoned:
            return None

    def _begin_episode(self, instance_id: str) -> Episode | None:
        # Reads only: this host is the one writer (a file lock), and the episode's own writes
        # wait for its end. A write transaction here only for messages nothing will replay.
        now = self.clock.now()
        instance = self.store.instance(instance_id)
        messages = self.store.visible_messages(instance_id, now)
        finished = instance is None or instance.status in FINISHED
        new_events = (
            []
            if instance is None or finished
            else [json.loads(m.event) for m in messages if m.execution_id == instance.execution_id]
        )
        if instance is None or finished or not new_events or instance.completing:
            with self.store.tx() as tx:
                tx.take_messages([m.id for m in messages])
                if new_events:  # so the instance is not finished
                    # The orchestrator already returned; it only waited for its uncancelled timers.
                    self._complete_if_no_timers(tx, instance_id, now)
            return None
        played = [as_played(text) for text in self.store.history(instance_id)]
        events = [new_event(EventType.ORCHESTRATOR_STARTED, now), *new_events]
        fields = context_fields(instance_id, instance.input, is_replaying=bool(played))
        return Episode(
            instance_id=instance_id,
            name=instance.name,
            execution_id=instance.execution_id,
            inbox_ids=tuple(m.id for m in messages),
            played=len(played),
            scheduled=[json.loads(text) for text in played if is_scheduling(text)],
            events=events,
            now=now,
            context=orchestration_context(played + [event_text(e) for e in events], fields),
            fields=fields,
        )

    def _end_episode(
        self, tx: StoreTx, episode: Episode, state: dict[str, Any] | None, error: str | None
    ) -> None:
        instance_id, now = episode.instance_id, episode.now
        current = tx.instance(instance_id)
        if current is None or current.execution_id != episode.execution_id or current.status in FINISHED:
            return  # terminated, purged or restarted while the orchestrator ran: its events went with it
        if tx.take_messages(episode.inbox_ids) != len(episode.inbox_ids):
            raise EpisodeConflict(f"the inbox of {instance_id} changed under a running episode")
        events = list(episode.events)
        outcome = self._apply_actions(
            tx,
            instance_id=instance_id,
            execution_id=episode.execution_id,
            state=state,
            scheduled=episode.scheduled,
            episode=events,
            now=now,
        )
        if outcome is not None and error is None:
            error = outcome
        events.append(new_event(EventType.ORCHESTRATOR_COMPLETED, now))
        tx.append_history(instance_id, episode.played, [event_text(e) for e in events])
        custom = None if state is None else state.get("customStatus")
        tx.mark_running(instance_id, None if custom is None else json.dumps(custom), now)
        if error is not None:
            tx.drop_work(instance_id)
            tx.finish(instance_id, RuntimeStatus.FAILED, json.dumps(error), now)
        elif state is not None and state.get("isDone"):
            self._on_done(tx, current, state, now)

    def _apply_actions(
        self,
        tx: StoreTx,
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
        for action in flatten_actions([a for group in groups for a in group]):
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
                if not _same_action(past, action):
                    return (
                        f"Non-deterministic workflow detected: task {task_id} was "
                        f"{json.dumps(past.get('Name') or 'a timer')} in the history but the "
                        f"orchestrator now asks for {json.dumps(action.get('functionName') or 'a timer')}"
                    )
                if kind == ActionType.CREATE_TIMER and action.get("isCanceled"):
                    tx.cancel_timer(instance_id, task_id)
                continue
            if kind == ActionType.CALL_ACTIVITY:
                episode.append(
                    new_event(EventType.TASK_SCHEDULED, now, EventId=task_id, Name=action["functionName"])
                )
                tx.add_activity(
                    instance_id, execution_id, task_id, action["functionName"], action.get("input")
                )
            else:
                fire_at = action["fireAt"]
                episode.append(new_event(EventType.TIMER_CREATED, now, EventId=task_id, FireAt=fire_at))
                if not action.get("isCanceled"):
                    fired = new_event(EventType.TIMER_FIRED, now, TimerId=task_id, FireAt=fire_at)
                    tx.add_timer(
                        instance_id, execution_id, task_id, parse_fire_at(fire_at), event_text(fired)
                    )
        return None

    def _on_done(self, tx: StoreTx, instance: Instance, state: dict[str, Any], now: datetime) -> None:
        groups = state.get("actions") or []
        restart = next(
            (
                a
                for a in flatten_actions([a for g in groups for a in g])
                if a.get("actionType") == ActionType.CONTINUE_AS_NEW
            ),
            None,
        )
        if restart is not None:
            self._continue_as_new(tx, instance, restart.get("input"), now)
            return
        tx.mark_completing(instance.instance_id, json.dumps(state.get("output")))
        self._complete_if_no_timers(tx, instance.instance_id, now)

    @staticmethod
    def _complete_if_no_timers(tx: StoreTx, instance_id: str, now: datetime) -> None:
        # An uncancelled durable timer keeps the instance running until it fires (as in Azure).
        if tx.pending_timers(instance_id):
            return
        instance = tx.instance(instance_id)
        output = None if instance is None else instance.output
        tx.drop_work(instance_id)
        tx.finish(instance_id, RuntimeStatus.COMPLETED, output, now)

    def _continue_as_new(
        self, tx: StoreTx, instance: Instance, input_json: str | None, now: datetime
    ) -> None:
        instance_id, execution_id = instance.instance_id, uuid.uuid4().hex
        tx.drop_work(instance_id)
        tx.restart_instance(instance_id, execution_id=execution_id, input_json=input_json, now=now)
        self._start_execution(
            tx, instance_id, execution_id=execution_id, name=instance.name, input_json=input_json, now=now
        )

    @staticmethod
    def _start_execution(
        tx: StoreTx, instance_id: str, *, execution_id: str, name: str, input_json: str | None, now: datetime
    ) -> None:
        started = new_event(
            EventType.EXECUTION_STARTED,
            now,
            Name=name,
            Input=input_json,
            Version="",
            OrchestrationInstance={"InstanceId": instance_id, "ExecutionId": execution_id},
        )
        tx.deliver(instance_id, execution_id, event_text(started), now)

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
        candidates = self.store.activities(limit + len(self._leases))
        claimed = [work for work in candidates if work.id not in self._leases][:limit]
        for work in claimed:
            self._leases[work.id] = now + ACTIVITY_LEASE
        return claimed

    def finish_activities(self, outcomes: list[ActivityOutcome]) -> None:
        """Deliver activities' results, in one transaction; a result whose instance was
        terminated or restarted meanwhile is dropped."""
        if not outcomes:
            return
        now = self.clock.now()
        with self.store.tx() as tx:
            for outcome in outcomes:
                work = outcome.work
                self._leases.pop(work.id, None)
                if not tx.take_activity(work.id):
                    continue
                if outcome.failure is None:
                    event = new_event(
                        EventType.TASK_COMPLETED, now, TaskScheduledId=work.task_id, Result=outcome.result
                    )
                else:
                    reason, details = outcome.failure
                    event = new_event(
                        EventType.TASK_FAILED,
                        now,
                        TaskScheduledId=work.task_id,
                        Reason=reason,
                        Details=details,
                    )
                tx.deliver(work.instance_id, work.execution_id, event_text(event), now)
        self.changed(Queued.EVENTS)

    def pending_activities(self) -> int:
        return self.store.pending_activities()


def _same_action(past: dict[str, Any], action: dict[str, Any]) -> bool:
    """Whether an action asks for what the history recorded at its place (determinism)."""
    if action.get("actionType") == ActionType.CALL_ACTIVITY:
        same_name = past.get("Name") == action.get("functionName")
        return bool(past["EventType"] == EventType.TASK_SCHEDULED and same_name)
    return bool(past["EventType"] == EventType.TIMER_CREATED)


def _status_json(instance: Instance, show_input: bool) -> dict[str, Any]:
    """An instance as the Durable HTTP API reports it (the SDK's ``DurableOrchestrationStatus``)."""
    return {
        "name": instance.name,
        "instanceId": instance.instance_id,
        "runtimeStatus": instance.status.value,
        "input": json.loads(instance.input) if show_input and instance.input else None,
        "output": json.loads(instance.output) if instance.output else None,
        "customStatus": json.loads(instance.custom_status) if instance.custom_status else None,
        "createdTime": instance.created_at,
        "lastUpdatedTime": instance.updated_at,
    }


async def _no_orchestrators(name: str, context: str, fields: dict[str, Any]) -> str:
    raise OrchestratorFailed(f"this engine runs no orchestrators (asked for {name})")
