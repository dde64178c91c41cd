"""How an order ends, and what each ending tells (E12, E15, E16, C8, C11).

An ending is a terminal state of the record. Each one tells the submitting app its final status
on its own queue (E16), gives the orders row its final status, and, when a person must look,
alerts an operator. What is still to tell is kept on the record itself (``StateRecord.Untold``),
written by the same conditional write that makes the record terminal: an outbox. A part is
cleared only once it is done, so an outage or a crash between the write and the telling leaves
the part on the record for whoever comes next (the finishing activity's repeat, or the
Supervisor's sweep), and nothing told is forgotten.
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum
from types import MappingProxyType

from domain.states import OrderStatus, ProcessState


class Part(StrEnum):
    """The parts of an ending's notice, named as the record's ``Untold`` stores them."""

    ORDERS_STATUS = "OrdersStatus"  # the orders row's final status
    STATUS = "Status"  # the submitting app's final status message
    ALERT = "Alert"  # the operator alert's event


@dataclass(frozen=True)
class Notice:
    """What an ending tells; on the record, what it has still to tell (None: that part is done)."""

    OrdersStatus: str | None = None
    Status: OrderStatus | None = None
    Alert: str | None = None

    def parts(self) -> tuple[Part, ...]:
        return tuple(Part(f.name) for f in fields(self) if getattr(self, f.name) is not None)

    def document(self) -> dict[str, str | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_document(cls, doc: Mapping[str, str | None]) -> "Notice":
        status = doc.get("Status")
        return cls(doc.get("OrdersStatus"), None if status is None else OrderStatus(status), doc.get("Alert"))

    def without(self, done: Collection[Part]) -> "Notice | None":
        """The notice with ``done`` cleared; None once nothing is left to tell."""
        left = replace(self, **{part.value: None for part in done})
        return left if left.parts() else None


# The Supervisor gave up on the order (E15): the alert says so, whatever state it ended in.
GAVE_UP_ALERT = "RecoveryGaveUp"

# Each ending: the submitter's status, the orders row's status, the operator alert. A Processed
# order's row keeps the status its last local step gave it (Confirmed, Shipped): no part for it.
ENDINGS: Mapping[ProcessState, Notice] = MappingProxyType(
    {
        ProcessState.PROCESSED: Notice(Status=OrderStatus.COMPLETED),
        ProcessState.ERROR: Notice("Failed", OrderStatus.FAILED, "OrderFailed"),
        ProcessState.COMPENSATED: Notice("Cancelled", OrderStatus.COMPENSATED, "OrderCompensated"),
        ProcessState.COMPENSATION_FAILED: Notice(
            "CompensationFailed", OrderStatus.COMPENSATION_FAILED, "CompensationFailed"
        ),
    }
)


def notice(state: ProcessState, *, gave_up: bool = False) -> Notice:
    """What ending in ``state`` tells; a give-up (E15) alerts as one."""
    told = ENDINGS[state]
    return replace(told, Alert=GAVE_UP_ALERT) if gave_up else told
