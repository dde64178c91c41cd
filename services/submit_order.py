"""Submission (E2, C6): write the order and its state record, each idempotently.

The two writes share no transaction. Both are keyed by the OrderID and compared by the
hash of the immutable order data, so a redelivered message repeats them safely and a crash
between them is repaired by the redelivery; a different order under a known OrderID is a
conflict, reported and never written over.

While the orders database is down, the state record is written anyway, held
(``transitions.awaiting_order_row``): the order is findable from its 202, as waiting on the
orders database, but no attempt claims it before its order row exists. The copy of the
submission that writes the row releases it, so a crash anywhere in between is repaired by the
next delivery as before.
"""

from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from domain import transitions
from domain.apps import Registry
from domain.errors import DependencyUnavailable
from domain.messages import QueuedOrder
from domain.policy import SchedulerPolicy
from domain.ports import Clock, InsertOutcome, OrderLineRow, OrderRow, OrdersRepository, StateStore, Stored
from domain.record import DEFAULT_WORKFLOW_VERSION, StateRecord

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
    record = transitions.create(
        order_id,
        status_queue=submission.status_queue,
        order_hash=order_hash,
        now=now,
        policy=policy,
        workflow_version=workflow_version,
    )
    try:
        inserted = orders.insert_if_absent(_order_row(submission, order_hash, now))
    except DependencyUnavailable as outage:
        held = _hold(states, record, outage)
        if held is not None and held.record.OrderHash != order_hash:
            # The held record answered another order's 202 first: this one is the conflict.
            return SubmitResult(
                SubmitOutcome.CONFLICT,
                order_id,
                f"order {order_id} already has a state record for different data",
                held,
            )
        raise
    if inserted is InsertOutcome.CONFLICT:
        return SubmitResult(
            SubmitOutcome.CONFLICT,
            order_id,
            f"order {order_id} already exists in the orders database with different data",
        )
    created = states.create_if_absent(record)
    stored = created.stored
    if not created.created and stored.record.OrderHash != order_hash:
        return SubmitResult(
            SubmitOutcome.CONFLICT,
            order_id,
            f"order {order_id} already has a state record for different data",
            stored,
        )
    released = transitions.is_awaiting_order_row(stored.record)
    if released:
        # The row is there now (written by this call or by one that crashed before this line).
        # A racing copy that releases it first makes this replace fail: that delivery is
        # abandoned and comes back a duplicate.
        stored = states.replace(transitions.order_row_written(stored.record, now), stored.etag)
    if released or created.created or inserted is InsertOutcome.CREATED:
        return SubmitResult(SubmitOutcome.ACCEPTED, order_id, stored=stored)
    return SubmitResult(SubmitOutcome.DUPLICATE, order_id, stored=stored)


def _order_row(submission: QueuedOrder, order_hash: str, now: datetime) -> OrderRow:
    return OrderRow(
        OrderID=submission.OrderID,
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


def _hold(states: StateStore, record: StateRecord, outage: DependencyUnavailable) -> Stored | None:
    """Make the order findable while its row cannot be written: the state record, held; the
    record stored under the OrderID, or None with the state store down too (the submission is
    postponed all the same)."""
    with suppress(DependencyUnavailable):
        return states.create_if_absent(transitions.awaiting_order_row(record, outage.dependency)).stored
    return None


def conflict_detail(order_id: str) -> str:
    """What a submitter is told when its OrderID cannot be used: the same words whether the ID
    is its own with other data or another app's, and nothing about the order that holds it (no
    owner, no data, no state). That the ID is in use is the one thing a shared ID space cannot
    hide (docs/design.md, "OrderIDs are one namespace")."""
    return f"OrderID {order_id} cannot be used for this order: choose another OrderID"
