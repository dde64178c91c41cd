"""The order workflow's steps, by version (C7): what runs where, and how each step is undone.

The orchestrator for a version reads its step list from here, so the definition is pure data
that both the orchestrator (deterministically) and the activities agree on. A new version is a
new entry; in-flight orders keep the version stored in their record.
"""

from dataclasses import dataclass
from enum import StrEnum


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
class Workflow:
    version: str
    steps: tuple[Step, ...]

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


# The orchestrator every new attempt runs, whatever its workflow version: the steps are run by
# its activity, which reads the version from the record, so a new version needs no new
# orchestrator. A change to the orchestrator's own code gets a new name (C7), and the old one
# stays registered until no instance of it is left.
ATTEMPT_ORCHESTRATOR = "order_attempt"


def orchestrator_name(version: str) -> str:
    """The first engine's orchestrators, one per version (drained: see function_app.py)."""
    return f"order_workflow_{version}"


ORDER_WORKFLOW_V1 = Workflow(
    version="v1",
    steps=(
        Step("ValidateOrder", Runs.LOCAL),
        Step("ReserveInventory", Runs.AGENT, compensation="ReleaseInventory"),
        Step("ChargePayment", Runs.AGENT, compensation="RefundPayment"),
        Step("ConfirmOrder", Runs.LOCAL),
    ),
)

# v2 ships the order after confirming it. Orders started under v1 finish under v1 (C7).
ORDER_WORKFLOW_V2 = Workflow(
    version="v2",
    steps=(*ORDER_WORKFLOW_V1.steps, Step("ShipOrder", Runs.LOCAL)),
)

WORKFLOWS: dict[str, Workflow] = {w.version: w for w in (ORDER_WORKFLOW_V1, ORDER_WORKFLOW_V2)}
