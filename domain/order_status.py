"""The orders table's Status column: which of several writers' statuses wins."""

# Orders.Status is written by several attempts, and by the Supervisor: each write carries a version,
# and a write never replaces a newer one. A later attempt outranks an earlier one; within an
# attempt, a later step outranks an earlier one, and the attempt's end (a terminal status)
# outranks its steps — so a stale attempt's late "Confirmed" cannot undo a "Failed".
STATUS_PHASES: dict[str, int] = {"Confirmed": 1, "Shipped": 2}
TERMINAL_STATUS_PHASE = 9


def status_version(attempt: int, status: str) -> int:
    return attempt * 10 + STATUS_PHASES.get(status, TERMINAL_STATUS_PHASE)
