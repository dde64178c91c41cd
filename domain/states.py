"""The seven process states of a state record (E3, C8)."""

from enum import StrEnum


class ProcessState(StrEnum):
    PENDING = "Pending"
    PROCESSING = "Processing"
    PROCESSED = "Processed"
    ERROR = "Error"
    COMPENSATING = "Compensating"
    COMPENSATED = "Compensated"
    COMPENSATION_FAILED = "CompensationFailed"


# A record in one of these states is owned by exactly one orchestration attempt (LockedBy).
LOCKED_STATES = frozenset({ProcessState.PROCESSING, ProcessState.COMPENSATING})

# Nothing but an operator moves a record out of these.
TERMINAL_STATES = frozenset(
    {
        ProcessState.PROCESSED,
        ProcessState.ERROR,
        ProcessState.COMPENSATED,
        ProcessState.COMPENSATION_FAILED,
    }
)
