"""The generic step engine's vocabulary (C7): a workflow version is a list of steps, each run
locally or by the Agent, and undone by a compensating action; and the names the orchestrators
and activities are registered and called by.

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

    @property
    def orchestrator(self) -> str:
        return orchestrator_name(self.version)

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


# The orchestrator every new attempt runs, whatever its workflow version: the steps are run by
# its activity, which reads the version from the record, so a new version needs no new
# orchestrator. A change to the orchestrator's own code gets a new name (C7), and the old one
# stays registered until no instance of it is left.
ATTEMPT_ORCHESTRATOR = "order_attempt"


def orchestrator_name(version: str) -> str:
    """The first engine's orchestrators, one per version (drained: see function_app.py)."""
    return f"order_workflow_{version}"


class Activity(StrEnum):
    """The activity functions, by the one name function_app.py registers each under and the
    orchestrators call it by. What each takes and answers: ``activities.contracts``."""

    ADVANCE = "advance"  # everything between two waits of an order_attempt
    # The first engine's, one per action (orchestrators/first_engine.py): drained with it.
    READ_ORDER = "read_order"
    BEGIN_STEP = "begin_step"
    SEND_AGENT_REQUEST = "send_agent_request"
    RECORD_STEP = "record_step"
    RUN_LOCAL_STEP = "run_local_step"
    FINISH = "finish"
