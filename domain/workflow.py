"""The workflow model (C7): a workflow version is a list of steps, each run locally or by the
Agent, and undone by a compensating action; the step engine (``activities.steps``) runs them.
The names the orchestrators and activities are registered and called by are Durable wiring:
``contracts.names``.

A version is pure data that both the orchestrator (deterministically) and the activities agree
on. The sample workflow's versions, steps and business rules are in ``domain.sample_workflow``;
in-flight orders keep the version stored in their record.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Ending(StrEnum):
    """How an attempt (one orchestration instance) ends."""

    PROCESSED = "processed"
    ERROR = "error"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation-failed"
    FENCED = "fenced"  # a newer attempt owns the record: nothing more to do here
    TIMED_OUT = "timed-out"  # CompleteBy passed: the Supervisor takes over
    RETRY_LATER = "retry-later"  # transient faults outlasted the Agent's attempts: likewise
    NO_ORDER = "no-order"


class Runs(StrEnum):
    LOCAL = "local"  # an activity in the Function App
    AGENT = "agent"  # the remote service, through the Agent's request/reply queues


@dataclass(frozen=True)
class Step:
    name: str
    runs: Runs
    # The step's compensating action, or None when there is nothing to undo.
    compensation: str | None = None
    compensation_runs: Runs = Runs.AGENT


@dataclass(frozen=True)
class LocalAction:
    """An action the Function App runs itself (``Runs.LOCAL``): a check of what the step is
    given (the order, for a forward step) whose problem fails the step permanently, then the
    order's status to set in the orders database (``domain.order_status.STATUS_PHASES``). Each
    is safe to repeat (R8, C10)."""

    name: str
    problem: Callable[[Mapping[str, Any]], str | None] | None = None
    status: str | None = None


@dataclass(frozen=True)
class Workflow:
    version: str
    steps: tuple[Step, ...]
    # What each action that runs locally (a step's, or a compensation's) does.
    local_actions: tuple[LocalAction, ...] = ()

    def step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(f"workflow {self.version} has no step {name!r}")

    def sequence(self, name: str) -> int:
        """The step's position: compensation log entries sort by it (R9)."""
        return [s.name for s in self.steps].index(name)

    def local_action(self, name: str) -> LocalAction | None:
        for action in self.local_actions:
            if action.name == name:
                return action
        return None
