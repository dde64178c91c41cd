"""Submission (E2, C6): write the order and its state record, each idempotently.

The two writes share no transaction. Both are keyed by the OrderID and compared by the
hash of the immutable order data, so a redelivered message repeats them safely and a crash
between them is repaired by the redelivery; a different order under a known OrderID is a
conflict, reported and never written over.
"""

from dataclasses import dataclass
from enum import StrEnum

from domain import transitions
from domain.apps import Registry
from domain.messages import QueuedOrder
from domain.policy import SchedulerPolicy
from domain.ports import Clock, InsertOutcome, OrderLineRow, OrderRow, OrdersRepository, StateStore, Stored
from domain.record import DEFAULT_WORKFLOW_VERSION

ORDER_STATUS_RECEIVED = "Received"


class SubmitOutcome(StrEnum):
    ACCEPTED = "accepted"  # this call wrote at least one of the two records
    DUPLICATE = "duplicate"  # both records already existed with the same data: a repeat
    CONFLICT = "conflict"  # the OrderID is taken by different order data
    REJECTED = "rejected"  # the submission is not allowed (e.g. from an app no longer registered)


@dataclass(frozen=True)
class SubmitResult:
    outcome: SubmitOutcome
    order_id: str
    reason: str | None = None
    stored: Stored | None = None  # the state record as stored now, with its ETag

    @property
    def ok(self) -> bool:
        return self.outcome in (SubmitOutcome.ACCEPTED, SubmitOutcome.DUPLICATE)


def submit_order(
    submission: QueuedOrder,
    *,
    orders: OrdersRepository,
    states: StateStore,
    clock: Clock,
    policy: SchedulerPolicy,
    submitters: Registry,
    workflow_version: str = DEFAULT_WORKFLOW_VERSION,
) -> SubmitResult:
    order_id = submission.OrderID
    if submitters.named(submission.SubmittedBy) is None:
        return SubmitResult(
            SubmitOutcome.REJECTED, order_id, f"{submission.SubmittedBy!r} is not a registered submitting app"
        )
    now = clock.now()
    order_hash = submission.order_hash()
    inserted = orders.insert_if_absent(
        OrderRow(
            OrderID=order_id,
            Customer=submission.Customer,
            Total=submission.Total,
            StatusQueue=submission.status_queue,
            OrderHash=order_hash,
            Status=ORDER_STATUS_RECEIVED,
            Lines=tuple(
                OrderLineRow(Sku=line.Sku, Quantity=line.Quantity, UnitPrice=line.UnitPrice)
                for line in submission.Lines
            ),
            CreatedAt=now,
            UpdatedAt=now,
        )
    )
    if inserted is InsertOutcome.CONFLICT:
        return SubmitResult(
            SubmitOutcome.CONFLICT,
            order_id,
            f"order {order_id} already exists in the orders database with different data",
        )
    created = states.create_if_absent(
        transitions.create(
            order_id,
            status_queue=submission.status_queue,
            order_hash=order_hash,
            now=now,
            policy=policy,
            workflow_version=workflow_version,
        )
    )
    stored = created.stored
    if not created.created and stored.record.OrderHash != order_hash:
        return SubmitResult(
            SubmitOutcome.CONFLICT,
            order_id,
            f"order {order_id} already has a state record for different data",
            stored,
        )
    if created.created or inserted is InsertOutcome.CREATED:
        return SubmitResult(SubmitOutcome.ACCEPTED, order_id, stored=stored)
    return SubmitResult(SubmitOutcome.DUPLICATE, order_id, stored=stored)


def conflict_detail(order_id: str) -> str:
    """What a submitter is told when its OrderID cannot be used: the same words whether the ID
    is its own with other data or another app's, and nothing about the order that holds it (no
    owner, no data, no state). That the ID is in use is the one thing a shared ID space cannot
    hide (docs/design.md, "OrderIDs are one namespace")."""
    return f"OrderID {order_id} cannot be used for this order: choose another OrderID"
