"""The seven process states of a state record (E3, C8), and the statuses a submitting app hears (E16)."""

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


class OrderStatus(StrEnum):
    REJECTED = "rejected"  # refused at submission (a conflict or a rule): nothing was stored
    RECEIVED = "received"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation-failed"
