"""Durable Functions for devhost: the part of the Durable extension that schedules the work.

Orchestrators are replayed by the Durable SDK inside the Functions worker, on real history JSON
(``harness.devhost.durable_wire``); the engine only plays the part of the Durable extension: it keeps the
history (``harness.devhost.durable_store``), turns the actions an episode returns into work (activities,
timers), and delivers results back as history events. Episodes replayed together are committed
in one transaction after their orchestrators return, and activity results that finish together
in another, so a ``kill -9`` at any point loses nothing committed: on restart, unfinished work
simply runs again (activities are at-least-once, as in Azure).
"""

import asyncio
import base64
import binascii
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from harness.devhost.clock import HostClock
from harness.devhost.durable_store import ActivityWork, DurableStore, Instance, ParentLink, StoreTx
from harness.devhost.durable_wire import (
    FINISHED,
    ActionType,
    EventType,
    RuntimeStatus,
    as_played,
    context_fields,
    event_text,
    flatten_actions,
    format_time,
    is_scheduling,
    new_event,
    orchestration_context,
    parse_fire_at,
    parse_time,
    parse_token,
    project_history,
    split_orchestrator_error,
)

ACTIVITY_LEASE = timedelta(minutes=10)
# DurableClient.MaxInstanceIdLength.
MAX_INSTANCE_ID_LENGTH = 256
# OrchestrationStatusQueryCondition.PageSize's default: a list without ``top`` is paged too.
DEFAULT_PAGE_SIZE = 100


class UnknownOrchestrator(Exception):
    pass


class InvalidInstanceId(Exception):
    pass


class InstanceExists(Exception):
    pass


@dataclass(frozen=True)
class ListQuery:
    """The list API's filters (``OrchestrationStatusQueryCondition``)."""

    statuses: set[str] | None = None
    prefix: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    show_input: bool = False
    top: int | None = None
    continuation: str | None = None


class Queued(StrEnum):
    EVENTS = "events"
    ACTIVITIES = "activities"


class OperationOutcome(StrEnum):
    """What an operation sent to an instance (raise an event, terminate) came to."""

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
    failed: frozenset[int]  # task IDs whose activity or sub-orchestration failed, so far
    fired: frozenset[int]  # timer IDs that fired, so far
    events: list[dict[str, Any]]
    now: datetime
    context: str
    fields: dict[str, Any]


class DurableEngine:
    """The part of the Durable extension devhost needs: start, events, replay, timers, activities."""

    def __init__(
        self,
        store: DurableStore,
        clock: HostClock,
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
        """Start an instance, as ``DurableClient.StartNewAsync`` with the default
        ``overridableExistingInstanceStates`` (NonRunningStates): an ended instance of the same ID
        is replaced, a pending or running one is not."""
        self._check_orchestrator(name)
        instance_id = instance_id or uuid.uuid4().hex
        _check_instance_id(instance_id)
        now = self.clock.now()
        with self.store.tx() as tx:
            self._create(tx, instance_id, name, input_json, now, parent=None)
        self.changed(Queued.EVENTS)
        return instance_id

    def _check_orchestrator(self, name: str) -> None:
        if name in self.orchestrators:
            return
        # DurableTaskExtension.GetInvalidOrchestratorFunctionMessage.
        known = "', '".join(sorted(self.orchestrators))
        info = (
            f"The following are the known orchestrator functions: '{known}'."
            if known
            else "No orchestrator functions are currently registered!"
        )
        raise UnknownOrchestrator(
            f"The function '{name}' doesn't exist, is disabled, or is not an orchestrator function. "
            f"Additional info: {info}"
        )

    def _create(
        self,
        tx: StoreTx,
        instance_id: str,
        name: str,
        input_json: str | None,
        now: datetime,
        *,
        parent: ParentLink | None,
    ) -> None:
        existing = tx.instance(instance_id)
        if existing is not None and existing.status not in FINISHED:
            # DurableTask.AzureStorage's OrchestrationAlreadyExistsException.
            raise InstanceExists(
                f"An Orchestration instance with the status {existing.status} already exists."
            )
        if existing is not None:
            tx.forget(instance_id)
        execution_id = uuid.uuid4().hex
        tx.insert_instance(instance_id, name=name, execution_id=execution_id, input_json=input_json, now=now)
        if parent is not None:
            tx.link_parent(instance_id, parent)
        self._start_execution(
            tx,
            instance_id,
            execution_id=execution_id,
            name=name,
            input_json=input_json,
            now=now,
            parent=parent,
        )

    def raise_event(self, instance_id: str, name: str, input_json: str | None) -> OperationOutcome:
        now = self.clock.now()
        with self.store.tx() as tx:
            instance = tx.instance(instance_id)
            if instance is None:
                return OperationOutcome.NOT_FOUND
            if instance.status in FINISHED:
                return OperationOutcome.GONE
            if instance.completing:
                return (
                    OperationOutcome.ACCEPTED
                )  # the extension takes it, and the ended orchestrator drops it
            event = new_event(EventType.EVENT_RAISED, now, Name=name, Input=input_json)
            tx.deliver(instance_id, instance.execution_id, event_text(event), now)
        self.changed(Queued.EVENTS)
        return OperationOutcome.ACCEPTED

    def terminate(self, instance_id: str, reason: str | None) -> OperationOutcome:
        now = self.clock.now()
        with self.store.tx() as tx:
            instance = tx.instance(instance_id)
            if instance is None:
                return OperationOutcome.NOT_FOUND
            if instance.status in FINISHED:
                return OperationOutcome.GONE
            tx.drop_work(instance_id)
            self._finish(tx, instance_id, RuntimeStatus.TERMINATED, json.dumps(reason), now)
        self.changed(Queued.EVENTS)
        return OperationOutcome.ACCEPTED

    def purge(self, instance_id: str) -> int:
        """Delete the instance and its history whatever its status, as the Azure Storage
        provider's ``PurgeInstanceHistoryAsync(instanceId)`` does; 0 if there was none."""
        with self.store.tx() as tx:
            if tx.instance(instance_id) is None:
                return 0
            tx.forget(instance_id)
        return 1

    def purge_by_filters(
        self, created_from: datetime, created_to: datetime, statuses: set[str] | None
    ) -> int:
        """``PurgeInstanceHistoryAsync(createdTimeFrom, createdTimeTo, runtimeStatus)``: the Azure
        Storage provider keeps only the ended statuses of the filter."""
        ended = None if statuses is None else {s for s in statuses if RuntimeStatus(s) in FINISHED}
        if ended is not None and not ended:
            return 0
        low, high = format_time(created_from), format_time(created_to)
        doomed = [
            i.instance_id
            for i in self.store.instances()
            if low <= i.created_at <= high and (ended is None or i.status in ended)
        ]
        with self.store.tx() as tx:
            for instance_id in doomed:
                tx.forget(instance_id)
        return len(doomed)

    def stored_input(self, instance_id: str) -> str | None:
        instance = self.store.instance(instance_id)
        return None if instance is None else instance.input

    def status(
        self,
        instance_id: str,
        *,
        show_history: bool = False,
        show_history_output: bool = False,
        show_input: bool = True,
    ) -> dict[str, Any] | None:
        """An instance as ``DurableClient.GetStatusAsync`` reports it; with ``show_history``, its
        history projected as there (``historyEvents``; none while it is Pending)."""
        instance = self.store.instance(instance_id)
        if instance is None:
            return None
        status = _status_json(instance, show_input)
        if show_history and instance.status != RuntimeStatus.PENDING:
            status["historyEvents"] = project_history(
                [*self.store.history(instance_id), *_closing_events(instance)],
                show_output=show_history_output,
                show_input=show_input,
            )
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

    def list_page(self, query: ListQuery) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the list API, and the continuation token of the next (None at the end).
        Instances come in instance ID order, as the Azure Storage provider's Instances table
        returns them (by partition key); the token is opaque to callers."""
        after = _decode_token(query.continuation)
        low = None if query.created_from is None else format_time(query.created_from)
        high = None if query.created_to is None else format_time(query.created_to)
        size = query.top if query.top and query.top > 0 else DEFAULT_PAGE_SIZE
        matching = [
            instance
            for instance in sorted(self.store.instances(), key=lambda i: i.instance_id)
            if (after is None or instance.instance_id > after)
            and (not query.statuses or instance.status in query.statuses)
            and (not query.prefix or instance.instance_id.startswith(query.prefix))
            and (low is None or instance.created_at >= low)
            and (high is None or instance.created_at <= high)
        ]
        page = matching[:size]
        token = _encode_token(page[-1].instance_id) if len(matching) > size else None
        return [_status_json(instance, query.show_input) for instance in page], token

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
            # OutOfProcOrchestrationShim reports the state's own error (the SDK's str(exception)).
            if state is not None and state.get("error"):
                error = str(state["error"])
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
        parent = self.store.parent(instance_id)
        fields = context_fields(
            instance_id,
            instance.input,
            is_replaying=bool(played),
            parent_instance_id=None if parent is None else parent.instance_id,
        )
        outcomes = [json.loads(text) for text in played if is_outcome(text)] + [
            e for e in new_events if e["EventType"] in OUTCOMES
        ]
        return Episode(
            instance_id=instance_id,
            name=instance.name,
            execution_id=instance.execution_id,
            inbox_ids=tuple(m.id for m in messages),
            played=len(played),
            scheduled=[json.loads(text) for text in played if is_scheduling(text)],
            failed=frozenset(e["TaskScheduledId"] for e in outcomes if e["EventType"] in FAILURES),
            fired=frozenset(e["TimerId"] for e in outcomes if e["EventType"] == EventType.TIMER_FIRED),
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
        outcome = self._apply_actions(tx, episode, state, events)
        if outcome is not None and error is None:
            error = outcome
        events.append(new_event(EventType.ORCHESTRATOR_COMPLETED, now))
        tx.append_history(instance_id, episode.played, [event_text(e) for e in events])
        custom = None if state is None else state.get("customStatus")
        tx.mark_running(instance_id, None if custom is None else json.dumps(custom), now)
        if error is not None:
            tx.drop_work(instance_id)
            # TaskOrchestrationShim / OutOfProcOrchestrationShim: the instance's output.
            failure = f"Orchestrator function '{episode.name}' failed: {error}"
            self._finish(tx, instance_id, RuntimeStatus.FAILED, json.dumps(failure), now)
        elif state is not None and state.get("isDone"):
            self._on_done(tx, current, state, now)

    def _apply_actions(
        self, tx: StoreTx, episode: Episode, state: dict[str, Any] | None, events: list[dict[str, Any]]
    ) -> str | None:
        """Schedule what the actions ask for that the history does not have yet (activities,
        timers, sub-orchestrations, retries), cancel timers; return an error for the instance."""
        if state is None:
            return None
        groups = state.get("actions") or []
        plan = _Plan(self, tx, episode, events)
        for action in flatten_actions([a for group in groups for a in group]):
            kind = action.get("actionType")
            if kind in (ActionType.WAIT_FOR_EXTERNAL_EVENT, ActionType.CONTINUE_AS_NEW):
                continue
            if kind in (ActionType.CALL_ACTIVITY, ActionType.CALL_SUB_ORCHESTRATOR):
                error = plan.task(action)
            elif kind in (ActionType.CALL_ACTIVITY_WITH_RETRY, ActionType.CALL_SUB_ORCHESTRATOR_WITH_RETRY):
                error = plan.with_retry(action)
            elif kind == ActionType.CREATE_TIMER:
                error = plan.timer(action)
            else:
                known = {int(a): a.name for a in ActionType}
                label = known.get(int(kind or -1), kind)
                return f"devhost does not support the orchestrator action {label}"
            if error is not None:
                return error
        return None

    def _schedule_task(
        self,
        tx: StoreTx,
        episode: Episode,
        task_id: int,
        action: dict[str, Any],
        events: list[dict[str, Any]],
    ) -> str | None:
        """An activity or a sub-orchestration, new at ``task_id``."""
        now, name, input_json = episode.now, action["functionName"], action.get("input")
        if action.get("actionType") in (ActionType.CALL_ACTIVITY, ActionType.CALL_ACTIVITY_WITH_RETRY):
            events.append(
                new_event(EventType.TASK_SCHEDULED, now, EventId=task_id, Name=name, Input=input_json)
            )
            tx.add_activity(episode.instance_id, episode.execution_id, task_id, name, input_json)
            return None
        # DTFx names an unnamed sub-orchestration "<parent execution ID>:<task ID>".
        child_id = action.get("instanceId") or f"{episode.execution_id}:{task_id}"
        if child_id == episode.instance_id:
            return (
                "The instance ID of a sub-orchestration must be different than the instance ID "
                "of a parent orchestration."
            )
        events.append(
            new_event(
                EventType.SUB_ORCHESTRATION_INSTANCE_CREATED,
                now,
                EventId=task_id,
                Name=name,
                InstanceId=child_id,
                Input=input_json,
            )
        )
        try:
            self._check_orchestrator(name)
            _check_instance_id(child_id)
            link = ParentLink(episode.instance_id, episode.execution_id, task_id)
            self._create(tx, child_id, name, input_json, now, parent=link)
        except (UnknownOrchestrator, InvalidInstanceId, InstanceExists) as error:
            failed = new_event(
                EventType.SUB_ORCHESTRATION_INSTANCE_FAILED,
                now,
                TaskScheduledId=task_id,
                Reason=str(error),
                Details="",
            )
            tx.deliver(episode.instance_id, episode.execution_id, event_text(failed), now)
        self.changed(Queued.EVENTS)
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
        DurableEngine._finish(tx, instance_id, RuntimeStatus.COMPLETED, output, now)

    @staticmethod
    def _finish(
        tx: StoreTx, instance_id: str, status: RuntimeStatus, output: str | None, now: datetime
    ) -> None:
        """End the instance; a sub-orchestration tells its parent, as DTFx sends the parent
        SubOrchestrationInstanceCompleted, or SubOrchestrationInstanceFailed for any other end."""
        tx.finish(instance_id, status, output, now)
        parent = tx.parent(instance_id)
        if parent is None:
            return
        if status == RuntimeStatus.COMPLETED:
            event = new_event(
                EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED,
                now,
                TaskScheduledId=parent.task_id,
                Result=output,
            )
        else:
            reason = json.loads(output) if output else None
            event = new_event(
                EventType.SUB_ORCHESTRATION_INSTANCE_FAILED,
                now,
                TaskScheduledId=parent.task_id,
                Reason=reason if isinstance(reason, str) else output,
                Details="",
            )
        tx.deliver(parent.instance_id, parent.execution_id, event_text(event), now)

    def _continue_as_new(
        self, tx: StoreTx, instance: Instance, input_json: str | None, now: datetime
    ) -> None:
        instance_id, execution_id = instance.instance_id, uuid.uuid4().hex
        tx.drop_work(instance_id)
        tx.restart_instance(instance_id, execution_id=execution_id, input_json=input_json, now=now)
        self._start_execution(
            tx,
            instance_id,
            execution_id=execution_id,
            name=instance.name,
            input_json=input_json,
            now=now,
            parent=tx.parent(instance_id),
        )

    @staticmethod
    def _start_execution(
        tx: StoreTx,
        instance_id: str,
        *,
        execution_id: str,
        name: str,
        input_json: str | None,
        now: datetime,
        parent: ParentLink | None,
    ) -> None:
        started = new_event(
            EventType.EXECUTION_STARTED,
            now,
            Name=name,
            Input=input_json,
            Version="",
            OrchestrationInstance={"InstanceId": instance_id, "ExecutionId": execution_id},
            ParentInstance=None
            if parent is None
            else {
                "OrchestrationInstance": {
                    "InstanceId": parent.instance_id,
                    "ExecutionId": parent.execution_id,
                }
            },
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


_RECORDED_AS = {
    ActionType.CALL_ACTIVITY: EventType.TASK_SCHEDULED,
    ActionType.CALL_ACTIVITY_WITH_RETRY: EventType.TASK_SCHEDULED,
    ActionType.CALL_SUB_ORCHESTRATOR: EventType.SUB_ORCHESTRATION_INSTANCE_CREATED,
    ActionType.CALL_SUB_ORCHESTRATOR_WITH_RETRY: EventType.SUB_ORCHESTRATION_INSTANCE_CREATED,
}
OUTCOMES = frozenset(
    {
        EventType.TASK_FAILED,
        EventType.SUB_ORCHESTRATION_INSTANCE_FAILED,
        EventType.TIMER_FIRED,
    }
)
FAILURES = frozenset({EventType.TASK_FAILED, EventType.SUB_ORCHESTRATION_INSTANCE_FAILED})


def is_outcome(text: str) -> bool:
    return text.startswith(tuple(f'{{"EventType": {int(kind)},' for kind in OUTCOMES))


class _Plan:
    """Walks an episode's actions against the task IDs the history gave out, as DTFx replays
    them: each activity, timer or sub-orchestration takes the next ID, and a retried call takes
    one per attempt and one per retry timer (DurableTask.Core's RetryInterceptor)."""

    def __init__(
        self, engine: DurableEngine, tx: StoreTx, episode: Episode, events: list[dict[str, Any]]
    ) -> None:
        self.engine, self.tx, self.episode, self.events = engine, tx, episode, events
        self.sequence = 0

    def _next(self) -> int:
        task_id = self.sequence
        self.sequence += 1
        return task_id

    def _past(self, task_id: int) -> dict[str, Any] | None:
        scheduled = self.episode.scheduled
        return scheduled[task_id] if task_id < len(scheduled) else None

    @staticmethod
    def _mismatch(task_id: int, past: dict[str, Any], asked: str) -> str:
        return (
            f"Non-deterministic workflow detected: task {task_id} was "
            f"{json.dumps(past.get('Name') or 'a timer')} in the history but the "
            f"orchestrator now asks for {json.dumps(asked)}"
        )

    def task(self, action: dict[str, Any]) -> str | None:
        """An activity or sub-orchestration at the next ID: checked if recorded, else scheduled."""
        task_id = self._next()
        past = self._past(task_id)
        if past is None:
            return self.engine._schedule_task(self.tx, self.episode, task_id, action, self.events)
        same = past["EventType"] == _RECORDED_AS[ActionType(action["actionType"])]
        if not same or past.get("Name") != action.get("functionName"):
            return self._mismatch(task_id, past, action.get("functionName") or "a task")
        return None

    def timer(self, action: dict[str, Any]) -> str | None:
        task_id = self._next()
        past = self._past(task_id)
        if past is not None:
            if past["EventType"] != EventType.TIMER_CREATED:
                return self._mismatch(task_id, past, "a timer")
            if action.get("isCanceled"):
                self.tx.cancel_timer(self.episode.instance_id, task_id)
            return None
        self._add_timer(task_id, action["fireAt"], cancelled=bool(action.get("isCanceled")))
        return None

    def _add_timer(self, task_id: int, fire_at: str, *, cancelled: bool = False) -> None:
        episode = self.episode
        self.events.append(new_event(EventType.TIMER_CREATED, episode.now, EventId=task_id, FireAt=fire_at))
        if not cancelled:
            fired = new_event(EventType.TIMER_FIRED, episode.now, TimerId=task_id, FireAt=fire_at)
            self.tx.add_timer(
                episode.instance_id, episode.execution_id, task_id, parse_fire_at(fire_at), event_text(fired)
            )

    def with_retry(self, action: dict[str, Any]) -> str | None:
        """A call with RetryOptions, as RetryInterceptor runs it: after a failed attempt, a
        timer of ``firstRetryInterval * backoffCoefficient ** attempt`` (capped by
        ``maxRetryInterval``), then the next attempt; after the last failed attempt, a timer
        that fires at once (DTFx keeps it for replay compatibility, and the SDK waits for it)."""
        try:
            options = RetryPolicy.from_json(action.get("retryOptions") or {})
        except ValueError as invalid:
            return str(invalid)
        attempt = 0
        while True:
            mismatch = self.task(action)
            if mismatch is not None:
                return mismatch
            task_id = self.sequence - 1
            if task_id >= len(self.episode.scheduled) or task_id not in self.episode.failed:
                return None  # just scheduled, still running, or succeeded
            timer_id = self._next()
            past = self._past(timer_id)
            if past is None:
                last = attempt + 1 >= options.max_attempts
                delay = timedelta(0) if last else options.delay(attempt)
                self._add_timer(timer_id, format_time(self.episode.now + delay))
                return None
            if past["EventType"] != EventType.TIMER_CREATED:
                return self._mismatch(timer_id, past, "a retry timer")
            if timer_id not in self.episode.fired or attempt + 1 >= options.max_attempts:
                return None  # waiting for the retry timer, or the SDK fails the task now
            attempt += 1


@dataclass(frozen=True)
class RetryPolicy:
    """RetryOptions as the extension reads them (``RetryOptionsConverter``), with DTFx defaults."""

    first_interval: timedelta
    max_attempts: int
    backoff: float = 1.0
    max_interval: timedelta | None = None

    @classmethod
    def from_json(cls, options: dict[str, Any]) -> "RetryPolicy":
        first = float(options.get("firstRetryIntervalInMilliseconds") or 0)
        if first <= 0:
            # RetryOptions' constructor: the first interval must be positive.
            raise ValueError("firstRetryInterval: Value must be greater than TimeSpan.Zero")
        ceiling = options.get("maxRetryIntervalInMilliseconds")
        return cls(
            first_interval=timedelta(milliseconds=first),
            max_attempts=int(options.get("maxNumberOfAttempts") or 1),
            backoff=float(options.get("backoffCoefficient") or 1.0),
            max_interval=None if ceiling is None else timedelta(milliseconds=float(ceiling)),
        )

    def delay(self, attempt: int) -> timedelta:
        """The wait after failed attempt ``attempt`` (0 for the first)."""
        delay = self.first_interval * (self.backoff**attempt)
        return delay if self.max_interval is None or delay < self.max_interval else self.max_interval


def _check_instance_id(instance_id: str) -> None:
    """DurableClient.StartNewAsync's checks. Its ArgumentExceptions pass the text as the
    parameter name, so .NET words them ``instanceId (Parameter '…')``."""
    if instance_id.startswith("@"):
        raise InvalidInstanceId("instanceId (Parameter 'Orchestration instance ids must not start with @.')")
    if any(c in "/\\?#" or ord(c) < 32 or 127 <= ord(c) < 160 for c in instance_id):
        raise InvalidInstanceId(
            "instanceId (Parameter 'Orchestration instance ids must not contain /, \\, #, ?, "
            "or control characters.')"
        )
    if len(instance_id) > MAX_INSTANCE_ID_LENGTH:
        raise InvalidInstanceId(f"Instance ID lengths must not exceed {MAX_INSTANCE_ID_LENGTH} characters.")


def _encode_token(after: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"after": after}).encode()).decode()


def _decode_token(token: str | None) -> str | None:
    if not token:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, binascii.Error):
        return None
    after = value.get("after") if isinstance(value, dict) else None
    return after if isinstance(after, str) else None


def _closing_events(instance: Instance) -> list[str]:
    """The ExecutionCompleted event DTFx records at an instance's end: devhost keeps the end in
    the instance's row, and writes the event only when the history is read."""
    if instance.status not in FINISHED:
        return []
    event = new_event(
        EventType.EXECUTION_COMPLETED,
        parse_time(instance.updated_at),
        OrchestrationStatus=instance.status.value,
        Result=instance.output,
    )
    return [event_text(event)]


def _status_json(instance: Instance, show_input: bool) -> dict[str, Any]:
    """An instance as the Durable HTTP API reports it (the SDK's ``DurableOrchestrationStatus``)."""
    return {
        "name": instance.name,
        "instanceId": instance.instance_id,
        "runtimeStatus": instance.status.value,
        # DurableClient.ParseToJToken: a start with a raw JSON string body stores that string, not
        # JSON text, and the status shows it as it is.
        "input": parse_token(instance.input) if show_input and instance.input else None,
        "output": json.loads(instance.output) if instance.output else None,
        "customStatus": json.loads(instance.custom_status) if instance.custom_status else None,
        "createdTime": instance.created_at,
        "lastUpdatedTime": instance.updated_at,
    }


async def _no_orchestrators(name: str, context: str, fields: dict[str, Any]) -> str:
    raise OrchestratorFailed(f"this engine runs no orchestrators (asked for {name})")
