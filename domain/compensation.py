"""The compensation log's entries (R9) and the one rule every log adapter applies to outcomes."""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from domain.errors import IllegalTransition


class CompensationOutcome(StrEnum):
    COMPENSATED = "Compensated"
    FAILED = "Failed"


@dataclass(frozen=True)
class CompensationEntry:
    """One completed step's way back (R9). Holds references only, never personal or card data (C5)."""

    OrderID: str
    Sequence: int  # the step's position in the workflow: entries sort by it
    Step: str
    Action: str
    Data: dict[str, str]
    RecordedAt: datetime
    Outcome: CompensationOutcome | None = None
    OutcomeAt: datetime | None = None
    Error: str | None = None


def next_outcome(current: CompensationEntry, outcome: CompensationOutcome) -> bool:
    """Whether recording ``outcome`` changes ``current``. A success is final: repeating it is a
    no-op, and a failure after it is refused (every compensation log adapter applies this)."""
    if current.Outcome is CompensationOutcome.COMPENSATED:
        if outcome is CompensationOutcome.COMPENSATED:
            return False
        raise IllegalTransition(
            f"compensation of {current.Step} for order {current.OrderID} already succeeded"
        )
    return True
