"""The CompensationLog contract: ordered, idempotent appends; outcomes per entry."""

from datetime import timedelta

import pytest

from domain.compensation import CompensationEntry, CompensationOutcome
from domain.errors import IllegalTransition, RecordNotFound
from domain.ports import CompensationLog
from tests.support.clock import T0


def entry(step: str, sequence: int, order_id: str = "o-1", **data: str) -> CompensationEntry:
    return CompensationEntry(
        OrderID=order_id,
        Sequence=sequence,
        Step=step,
        Action=f"Undo{step}",
        Data=data or {"ref": f"{step}-ref"},
        RecordedAt=T0 + timedelta(seconds=sequence),
    )


def test_entries_come_back_newest_first_whatever_the_append_order(compensation_log: CompensationLog) -> None:
    for step, sequence in (("ChargePayment", 2), ("ReserveInventory", 1), ("ShipOrder", 10)):
        compensation_log.append(entry(step, sequence))
    compensation_log.append(entry("ReserveInventory", 1, order_id="o-2"))
    steps = [e.Step for e in compensation_log.entries("o-1")]
    assert steps == ["ShipOrder", "ChargePayment", "ReserveInventory"]
    assert [e.OrderID for e in compensation_log.entries("o-2")] == ["o-2"]
    assert compensation_log.entries("none") == []


def test_a_repeated_append_returns_the_stored_entry_unchanged(compensation_log: CompensationLog) -> None:
    first = compensation_log.append(entry("ReserveInventory", 1, reservation="r-1"))
    again = compensation_log.append(entry("ReserveInventory", 1, reservation="r-2"))
    assert again == first
    assert again.Data == {"reservation": "r-1"}
    assert len(compensation_log.entries("o-1")) == 1


def test_outcomes_are_recorded_and_success_is_final(compensation_log: CompensationLog) -> None:
    compensation_log.append(entry("ChargePayment", 2))
    failed = compensation_log.record_outcome(
        "o-1", "ChargePayment", CompensationOutcome.FAILED, T0 + timedelta(minutes=1), "refund refused"
    )
    assert failed.Outcome is CompensationOutcome.FAILED and failed.Error == "refund refused"
    done = compensation_log.record_outcome(
        "o-1", "ChargePayment", CompensationOutcome.COMPENSATED, T0 + timedelta(minutes=2)
    )
    assert done.Outcome is CompensationOutcome.COMPENSATED
    assert done.OutcomeAt == T0 + timedelta(minutes=2) and done.Error is None
    repeat = compensation_log.record_outcome(
        "o-1", "ChargePayment", CompensationOutcome.COMPENSATED, T0 + timedelta(minutes=5)
    )
    assert repeat == done
    with pytest.raises(IllegalTransition):
        compensation_log.record_outcome("o-1", "ChargePayment", CompensationOutcome.FAILED, T0)
    with pytest.raises(RecordNotFound):
        compensation_log.record_outcome("o-1", "Unknown", CompensationOutcome.COMPENSATED, T0)
