"""The demo's judges: the invariants a run must keep, checked against what really happened.

The simulator's effects ledger says what the remote service did, whatever the clients saw; the
state records say where each order ended; the submitting apps say what they were told.
"""

from dataclasses import dataclass
from typing import NamedTuple

from adapters.servicebus.messages import ReceivedMessage
from domain.record import StateRecord
from domain.sample_workflow import ORDER_WORKFLOW_V2
from domain.states import TERMINAL_STATES, ProcessState
from harness.demo.apps import SubmittingApp

# The remote steps and their undo actions, from the sample workflow.
UNDO = {s.name: s.compensation for s in ORDER_WORKFLOW_V2.steps if s.compensation}
FORWARD = tuple(UNDO)
EXPECTED_STATUS = {
    ProcessState.PROCESSED: "completed",
    ProcessState.ERROR: "failed",
    ProcessState.COMPENSATED: "compensated",
    ProcessState.COMPENSATION_FAILED: "compensation-failed",
}


class Check(NamedTuple):
    name: str
    passed: bool
    detail: str


@dataclass
class Snapshot:
    """What the judges look at, taken before the processes stop."""

    ledger: dict[str, dict[str, int]]
    records: dict[str, StateRecord]
    dead: list[ReceivedMessage]
    elapsed: float

    def effects(self, order_id: str, action: str) -> int:
        return effects(self.ledger, order_id, action)


def effects(ledger: dict[str, dict[str, int]], order_id: str, action: str) -> int:
    """How many times the remote service applied ``action`` for ``order_id`` (its ledger)."""
    return int(ledger.get(f"{order_id}:{action}", {}).get("effects", 0))


def _check(name: str, failures: list[str]) -> Check:
    return Check(name, not failures, ", ".join(failures[:5]))


def effect_checks(
    ledger: dict[str, dict[str, int]], records: dict[str, StateRecord], budget: int
) -> list[Check]:
    """The remote service's side of a run, from its effects ledger: exactly once for processed
    orders, net zero for compensated ones, no key called past the retry budget. The end-to-end
    tests hold a run of their own to these."""

    def done(i: str, action: str) -> int:
        return effects(ledger, i, action)

    return [
        _check(
            "processed orders: exactly one effect per step, nothing undone",
            [
                i
                for i, r in records.items()
                if r.ProcessState is ProcessState.PROCESSED
                and ([done(i, s) for s in FORWARD] != [1, 1] or any(done(i, UNDO[s]) for s in FORWARD))
            ],
        ),
        _check(
            "compensated orders: net zero effect per step",
            [
                i
                for i, r in records.items()
                if r.ProcessState is ProcessState.COMPENSATED
                and any(done(i, s) != done(i, UNDO[s]) for s in FORWARD)
            ],
        ),
        _check(
            f"no idempotency key called more than the retry budget ({budget})",
            [k for k, v in ledger.items() if v["calls"] > budget],
        ),
    ]


def judge(apps: list[SubmittingApp], snapshot: Snapshot, budget: int) -> list[Check]:
    """Every invariant of the run, passed or not, with up to five offenders each."""
    records = snapshot.records
    accepted = [i for app in apps for i in app.submitted_at]
    checks: list[Check] = []

    def check(name: str, failures: list[str]) -> None:
        checks.append(_check(name, failures))

    check(
        "every accepted order reached a terminal state",
        [i for i in accepted if i not in records or records[i].ProcessState not in TERMINAL_STATES],
    )
    checks.extend(effect_checks(snapshot.ledger, records, budget))
    check(
        "each app heard exactly one ending per order, matching the record",
        [
            i
            for app in apps
            for i in app.submitted_at
            if app.terminal_statuses(i) != [EXPECTED_STATUS.get(records[i].ProcessState, "?")]
        ]
        if records
        else accepted,
    )
    check("no app heard about another app's orders", [i for app in apps for i in app.foreign])
    return checks
