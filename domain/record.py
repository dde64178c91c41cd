"""The state record (E3; its fields: docs/design.md "The state record") and its versioned document form (C7).

Attribute names are the pattern's field names verbatim, so the code reads against the
pattern and the stored document is the record's own fields. The record is immutable:
transitions in ``domain.transitions`` return a new one.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from domain.endings import Notice, notice
from domain.errors import UnsupportedSchemaVersion
from domain.ids import parse_instance_id
from domain.states import ProcessState
from domain.timestamps import format_optional, format_ts, parse_optional, parse_ts

SCHEMA_VERSION = 2
DEFAULT_WORKFLOW_VERSION = "v1"

# Steps the Supervisor recovers before the orchestration has begun one (claim, or between steps).
START_STEP = "$start"


def frozen_counts(mapping: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class RetryBudget:
    """The Scheduler's durable end-to-end budget of remote calls per step (C2)."""

    MaxCallsPerStep: int
    CallsUsed: Mapping[str, int] = field(default_factory=lambda: frozen_counts({}))

    def used(self, step: str) -> int:
        return self.CallsUsed.get(step, 0)

    def remaining(self, step: str) -> int:
        return max(0, self.MaxCallsPerStep - self.used(step))

    def debit(self, step: str, calls: int) -> "RetryBudget":
        return replace(self, CallsUsed=frozen_counts({**self.CallsUsed, step: self.used(step) + calls}))

    def reset(self, which: Callable[[str], bool]) -> "RetryBudget":
        """A fresh budget for the keys ``which`` selects (an operator's decision)."""
        kept = {k: v for k, v in self.CallsUsed.items() if not which(k)}
        return replace(self, CallsUsed=frozen_counts(kept))


@dataclass(frozen=True)
class StateRecord:
    OrderID: str
    ProcessState: ProcessState
    LockedBy: str | None
    CompleteBy: datetime | None
    FailureCount: int
    Attempt: int
    StatusQueue: str | None
    OrderHash: str | None
    WorkflowVersion: str
    RetryBudget: RetryBudget
    CreatedAt: datetime
    UpdatedAt: datetime
    CompletedSteps: tuple[str, ...] = ()
    CompensatedSteps: tuple[str, ...] = ()
    CurrentStep: str | None = None
    # Calls granted when CurrentStep began: a repeat of that begin gets the same grant, no new debit.
    CurrentGrant: int = 0
    FailedStep: str | None = None
    StepFailures: Mapping[str, int] = field(default_factory=lambda: frozen_counts({}))
    NotBefore: datetime | None = None
    CompensationRequested: bool = False
    LastError: str | None = None
    # The ending's outbox (``domain.endings``): what it has still to tell the orders row, the
    # submitter and an operator. Set by the write that makes the record terminal, each part
    # cleared once done; None when nothing is left to tell.
    Untold: Notice | None = None
    # The attempt's last word, when it ended on an outage: the dependency that was unavailable
    # (an activity's retries ran out on ``DependencyUnavailable``). Every transition clears it,
    # so it is set only while nothing happened after. The Supervisor does not count such an
    # expiry against the order (R7): ``domain.outage``.
    Unavailable: str | None = None
    # Consecutive expiries the Supervisor put down to outages: how long it waits before the next
    # uncounted try while the dependency is still down. Reset by an expiry it counts.
    OutageHolds: int = 0
    SchemaVersion: int = SCHEMA_VERSION

    @property
    def id(self) -> str:
        return self.OrderID

    def step_failures(self, step: str) -> int:
        return self.StepFailures.get(step, 0)

    @property
    def NoticePending(self) -> bool:  # stored under this name too: the stores index it
        return self.Untold is not None


def to_document(record: StateRecord) -> dict[str, Any]:
    """The JSON document stored for a record (Cosmos item / SQLite row body)."""
    return {
        "id": record.OrderID,
        "OrderID": record.OrderID,
        "ProcessState": record.ProcessState.value,
        "LockedBy": record.LockedBy,
        "CompleteBy": format_optional(record.CompleteBy),
        "FailureCount": record.FailureCount,
        "Attempt": record.Attempt,
        "StatusQueue": record.StatusQueue,
        "OrderHash": record.OrderHash,
        "WorkflowVersion": record.WorkflowVersion,
        "SchemaVersion": SCHEMA_VERSION,
        "CompletedSteps": list(record.CompletedSteps),
        "CompensatedSteps": list(record.CompensatedSteps),
        "CurrentStep": record.CurrentStep,
        "CurrentGrant": record.CurrentGrant,
        "FailedStep": record.FailedStep,
        "StepFailures": dict(record.StepFailures),
        "NotBefore": format_optional(record.NotBefore),
        "CompensationRequested": record.CompensationRequested,
        "RetryBudget": {
            "MaxCallsPerStep": record.RetryBudget.MaxCallsPerStep,
            "CallsUsed": dict(record.RetryBudget.CallsUsed),
        },
        "LastError": record.LastError,
        "Untold": None if record.Untold is None else record.Untold.document(),
        # Derived from Untold, and stored: the flag the stores index for the Supervisor's sweep.
        "NoticePending": record.NoticePending,
        "Unavailable": record.Unavailable,
        "OutageHolds": record.OutageHolds,
        "CreatedAt": format_ts(record.CreatedAt),
        "UpdatedAt": format_ts(record.UpdatedAt),
    }


def _untold(data: Mapping[str, Any]) -> Notice | None:
    """Added within schema 2 with a safe default. A document from before it that has
    ``NoticePending`` set is a give-up not yet told (its only use then): all of it is untold."""
    untold = data.get("Untold")
    if untold is not None:
        return Notice.from_document(untold)
    if data.get("NoticePending"):
        return notice(ProcessState(data["ProcessState"]), gave_up=True)
    return None


def _upgrade_v1(doc: dict[str, Any]) -> dict[str, Any]:
    """v1 is the pattern's own record (E3): OrderID, LockedBy, CompleteBy, ProcessState, FailureCount.

    Everything later versions added gets a safe default; the attempt number is recovered
    from the instance ID in LockedBy so that the next claim never reuses an instance ID.
    """
    try:
        attempt = parse_instance_id(doc.get("LockedBy") or "")[1]
    except ValueError:
        attempt = 0
    stamp = doc.get("UpdatedAt") or doc.get("CreatedAt") or "1970-01-01T00:00:00.000000Z"
    return {
        **doc,
        "Attempt": attempt,
        "StatusQueue": doc.get("StatusQueue"),
        "OrderHash": doc.get("OrderHash"),
        "WorkflowVersion": doc.get("WorkflowVersion", DEFAULT_WORKFLOW_VERSION),
        "CompletedSteps": [],
        "CompensatedSteps": [],
        "CurrentStep": None,
        "FailedStep": None,
        "StepFailures": {},
        "NotBefore": None,
        "CompensationRequested": False,
        "RetryBudget": {"MaxCallsPerStep": doc.get("MaxCallsPerStep", 12), "CallsUsed": {}},
        "LastError": None,
        "CreatedAt": doc.get("CreatedAt", stamp),
        "UpdatedAt": stamp,
        "SchemaVersion": 2,
    }


# Upgraders by the version they read; each returns the next version's document.
UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _upgrade_v1}


def from_document(doc: Mapping[str, Any]) -> StateRecord:
    """Read a stored document of any known schema version, upgrading it on read (C7)."""
    data = dict(doc)
    version = int(data.get("SchemaVersion", 1))
    if version > SCHEMA_VERSION:
        raise UnsupportedSchemaVersion(
            f"record {data.get('OrderID')!r} has SchemaVersion {version}; "
            f"this code reads up to {SCHEMA_VERSION}: deploy the newer code before reading it"
        )
    while version < SCHEMA_VERSION:
        data = UPGRADES[version](data)
        version = int(data["SchemaVersion"])
    budget = data["RetryBudget"]
    return StateRecord(
        OrderID=data["OrderID"],
        ProcessState=ProcessState(data["ProcessState"]),
        LockedBy=data["LockedBy"],
        CompleteBy=parse_optional(data["CompleteBy"]),
        FailureCount=int(data["FailureCount"]),
        Attempt=int(data["Attempt"]),
        StatusQueue=data["StatusQueue"],
        OrderHash=data["OrderHash"],
        WorkflowVersion=data["WorkflowVersion"],
        RetryBudget=RetryBudget(
            MaxCallsPerStep=int(budget["MaxCallsPerStep"]),
            CallsUsed=frozen_counts({str(k): int(v) for k, v in budget["CallsUsed"].items()}),
        ),
        CreatedAt=parse_ts(data["CreatedAt"]),
        UpdatedAt=parse_ts(data["UpdatedAt"]),
        CompletedSteps=tuple(data["CompletedSteps"]),
        CompensatedSteps=tuple(data["CompensatedSteps"]),
        CurrentStep=data["CurrentStep"],
        # Added within schema 2 with a safe default: documents written before it read as 0.
        CurrentGrant=int(data.get("CurrentGrant", 0)),
        FailedStep=data["FailedStep"],
        StepFailures=frozen_counts({str(k): int(v) for k, v in data["StepFailures"].items()}),
        NotBefore=parse_optional(data["NotBefore"]),
        CompensationRequested=bool(data["CompensationRequested"]),
        LastError=data["LastError"],
        Untold=_untold(data),
        # Added within schema 2 with safe defaults: documents written before them read as none.
        Unavailable=data.get("Unavailable"),
        OutageHolds=int(data.get("OutageHolds", 0)),
        SchemaVersion=SCHEMA_VERSION,
    )
