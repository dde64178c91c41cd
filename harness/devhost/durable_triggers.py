"""Orchestration and activity triggers: the engine's work run through the worker, as the Durable
extension dispatches it. Two pollers, so a slow activity never holds up an orchestration."""

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.devhost import bindings
from harness.devhost.clock import HostClock
from harness.devhost.durable_engine import (
    ActivityOutcome,
    DurableEngine,
    EpisodeAbandoned,
    OrchestratorFailed,
    Queued,
)
from harness.devhost.durable_store import ActivityWork, DurableStore
from harness.devhost.indexing import FunctionSpec
from harness.devhost.polling import Invoke
from harness.devhost.worker import InvocationFailed
from harness.devhost.worker_processes import WorkerDied

log = logging.getLogger("devhost")


class DurableTriggers:
    """The task hub (``durable.db``), the engine over it, and its two pollers."""

    def __init__(
        self,
        path: Path,
        orchestrators: Sequence[FunctionSpec],
        activities: Sequence[FunctionSpec],
        *,
        clock: HostClock,
        invoke: Invoke,
        concurrency: int,
    ) -> None:
        self.store = DurableStore(path)
        self.orchestrators = {f.name: f for f in orchestrators}
        self.activities = {f.name: f for f in activities}
        self._invoke = invoke
        self.engine = DurableEngine(self.store, clock, frozenset(self.orchestrators), self._run_orchestrator)
        self.engine.release_activity_leases()
        self.orchestration_poller = OrchestrationPoller(self.engine)
        self.activity_poller = ActivityPoller(self.engine, self._run_activity, concurrency)
        # The engine says when it queued an event or an activity: a result is replayed at once.
        wake = {Queued.EVENTS: self.orchestration_poller.wake, Queued.ACTIVITIES: self.activity_poller.wake}
        self.engine.changed = lambda queued: wake[queued].set()

    def next_due(self) -> datetime | None:
        return self.engine.next_due()

    def close(self) -> None:
        self.store.close()

    async def _run_orchestrator(self, name: str, context_json: str, fields: dict[str, Any]) -> str:
        spec = self.orchestrators[name]
        try:
            response = await self._invoke(
                spec, *bindings.orchestration_context(spec.trigger_param, context_json, fields)
            )
        except WorkerDied as error:
            log.warning("orchestrator %s: %s; its episode runs again", name, error.message)
            raise EpisodeAbandoned(error.message) from None
        except InvocationFailed as error:
            raise OrchestratorFailed(error.message) from None
        state = bindings.returned_json(response)
        if state is None:
            raise OrchestratorFailed(f"orchestrator function '{name}' returned no state")
        return state

    async def _run_activity(self, work: ActivityWork) -> ActivityOutcome:
        spec = self.activities.get(work.name)
        if spec is None:
            return ActivityOutcome(
                work, failure=(f"activity function '{work.name}' does not exist in the app", "")
            )
        try:
            response = await self._invoke(
                spec, *bindings.activity_input(spec.trigger_param, work.instance_id, work.input)
            )
        except InvocationFailed as error:  # an activity's exception is the task's failure
            reason = f"Activity function '{work.name}' failed: {error.message}"
            return ActivityOutcome(work, failure=(reason, error.stack_trace))
        return ActivityOutcome(work, result=bindings.returned_json(response))


class OrchestrationPoller:
    """Every ready instance's episode at once: the worker runs them on its own threads."""

    name = "orchestration loop"

    def __init__(self, engine: DurableEngine) -> None:
        self._engine = engine
        self.wake = asyncio.Event()

    async def poll(self) -> int:
        ready = self._engine.ready_instances()
        await self._engine.run_episodes(ready)
        if ready:
            self.wake.set()  # the episodes may have made more instances ready
        return len(ready)

    async def settle(self) -> None:
        """Nothing to wait for: ``poll`` commits its episodes before it returns."""

    async def stop(self) -> None:
        """Nothing runs after ``poll`` returns."""

    def next_due(self) -> datetime | None:
        """The next durable timer's FireAt."""
        return self._engine.next_due()


class ActivityPoller:
    """Up to DEVHOST_CONCURRENCY activities at a time, a new one as soon as a slot frees. Results
    that finish between two polls are committed together (group commit), in claim order."""

    name = "activity loop"

    def __init__(
        self,
        engine: DurableEngine,
        run: Callable[[ActivityWork], Coroutine[Any, Any, ActivityOutcome]],
        concurrency: int,
    ) -> None:
        self._engine = engine
        self._run = run
        self._concurrency = concurrency
        self._running: set[asyncio.Task[ActivityOutcome]] = set()
        self._finished: list[ActivityOutcome] = []
        self.wake = asyncio.Event()

    async def poll(self) -> int:
        self._commit()
        free = self._concurrency - len(self._running)
        work = self._engine.claim_activities(free) if free > 0 else []
        for item in work:
            task = asyncio.create_task(self._run(item))
            self._running.add(task)
            task.add_done_callback(self._done)
        if work:
            self.wake.set()  # more may be waiting for the slots still free
        return len(work)

    def _done(self, task: asyncio.Task[ActivityOutcome]) -> None:
        self._running.discard(task)
        if task.cancelled():
            pass  # the host is stopping: the activity runs again after a restart
        elif task.exception() is not None:
            log.error("activity task failed outside the function", exc_info=task.exception())
        else:
            self._finished.append(task.result())
        self.wake.set()

    def _commit(self) -> None:
        outcomes = sorted(self._finished, key=lambda outcome: outcome.work.id)
        self._finished.clear()
        try:
            self._engine.finish_activities(outcomes)
        except Exception:  # the activities run again after a restart: at least once
            log.exception("devhost could not record %d activity results", len(outcomes))

    async def settle(self) -> None:
        try:
            await asyncio.gather(*self._running)
        finally:
            self._commit()

    def next_due(self) -> None:
        """Woken, never due: the engine announces new activities; a lease that ran out is found
        within idle_wait."""
        return None

    async def stop(self) -> None:
        # What finished is recorded now, while the store is open; what still runs is abandoned
        # and runs again after a restart (at least once, as in Azure).
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        self._commit()
