"""The orchestrator↔activity contract keeps the wire form in-flight histories hold (C7): each JSON
below is what the activities and orchestrators wrote before the contract was typed, and parsing
it and writing it back gives the same bytes: same keys in the same order, absent keys absent,
an explicit null kept."""

import json
from typing import Any

import pytest

from activities import functions
from contracts import activities as contracts
from contracts.activities import ActivityContract
from contracts.names import Activity
from domain.messages import AgentReply

ORDER = (
    '{"OrderID": "o-1", "Customer": "Contoso", "Total": "20.00", '
    '"Lines": [{"Sku": "SKU-1", "Quantity": 2, "UnitPrice": "10.00"}]}'
)
IDS = '"OrderID": "o-1", "InstanceID": "o-1-1"'
STEP = IDS + ', "Step": "ReserveInventory", "Action": "ReserveInventory"'
REPLY = (
    '{"RequestID": "o-1-1:ReserveInventory", "InstanceID": "o-1-1", "Step": "ReserveInventory", '
    '"Outcome": "ok", "Result": {"ReserveInventoryId": "ref-o-1:ReserveInventory"}, "Error": null, '
    '"Attempts": 1}'
)
TO_COMPENSATE = (
    '[{"Step": "ChargePayment", "Action": "RefundPayment", "Data": {"ChargePaymentId": "ref-1"}}, '
    '{"Step": "ReserveInventory", "Action": "ReleaseInventory", "Data": {"ReserveInventoryId": "ref-2"}}]'
)

NONCE = '"Nonce": "' + "a" * 32 + '"'

INPUTS: list[tuple[ActivityContract[Any, Any], str]] = [
    (contracts.ADVANCE, "{" + IDS + "}"),
    (contracts.ADVANCE, "{" + STEP + ', "Reply": ' + REPLY + "}"),
    # Since nonces: the same, with the nonce for the request the call may send.
    (contracts.ADVANCE, "{" + IDS + ", " + NONCE + "}"),
    (contracts.ADVANCE, "{" + STEP + ', "Reply": ' + REPLY + ", " + NONCE + "}"),
    (contracts.READ_ORDER, "{" + IDS + "}"),
    (contracts.BEGIN_STEP, "{" + STEP + "}"),
    (
        contracts.SEND_AGENT_REQUEST,
        "{"
        + STEP
        + ', "CompleteBy": "2026-03-01T09:00:30+00:00", "MaxAttempts": 3, "Payload": '
        + ORDER
        + "}",
    ),
    (
        contracts.SEND_AGENT_REQUEST,
        "{" + STEP + ', "CompleteBy": "2026-03-01T09:00:30.123400+00:00", "MaxAttempts": 1, "Payload": {}}',
    ),
    (contracts.RECORD_STEP, "{" + STEP + ', "Result": {"ReserveInventoryId": "ref-o-1:ReserveInventory"}}'),
    (
        contracts.RUN_LOCAL_STEP,
        "{" + IDS + ', "Step": "ValidateOrder", "Action": "ValidateOrder", "Order": ' + ORDER + "}",
    ),
    (contracts.FINISH, "{" + IDS + ', "Outcome": "complete", "Error": null}'),
    (
        contracts.FINISH,
        "{" + IDS + ', "Outcome": "fail", "Error": "ConfirmOrder: SKU(s) BACKORDER-1 cannot be shipped"}',
    ),
]

RESULTS: list[tuple[ActivityContract[Any, Any], str]] = [
    (
        contracts.ADVANCE,
        '{"Wait": {"RequestID": "o-1-1:ReserveInventory", "CompleteBy": "2026-03-01T09:00:30+00:00", '
        '"Step": "ReserveInventory", "Action": "ReserveInventory"}}',
    ),
    (contracts.ADVANCE, '{"Ending": "compensation-failed"}'),
    (contracts.READ_ORDER, '{"Fenced": true}'),
    (contracts.READ_ORDER, '{"Fenced": false, "Missing": true}'),
    (
        contracts.READ_ORDER,
        '{"Fenced": false, "Missing": false, "Compensating": false, "CompletedSteps": ["ValidateOrder"], '
        '"ToCompensate": [], "Order": ' + ORDER + "}",
    ),
    (
        contracts.READ_ORDER,
        '{"Fenced": false, "Missing": false, "Compensating": true, "CompletedSteps": [], '
        '"ToCompensate": ' + TO_COMPENSATE + ', "Order": ' + ORDER + "}",
    ),
    (contracts.BEGIN_STEP, '{"Fenced": true}'),
    (contracts.BEGIN_STEP, '{"Fenced": false, "Exhausted": true, "Error": "the retry budget is spent"}'),
    (
        contracts.BEGIN_STEP,
        '{"Fenced": false, "Exhausted": false, "CompleteBy": "2026-03-01T09:00:30+00:00", "CallsGranted": 3}',
    ),
    (contracts.SEND_AGENT_REQUEST, '"o-1-1:ReserveInventory"'),
    (contracts.RECORD_STEP, '{"Fenced": false}'),
    (
        contracts.RUN_LOCAL_STEP,
        '{"Fenced": false, "Error": "ConfirmOrder: SKU(s) BACKORDER-1 cannot be shipped"}',
    ),
    (contracts.FINISH, '{"Fenced": false, "State": "Compensated"}'),
    (contracts.FINISH, '{"Fenced": false, "State": "Compensating", "ToCompensate": ' + TO_COMPENSATE + "}"),
]


def _id(case: tuple[ActivityContract[Any, Any], str]) -> str:
    return f"{case[0].name}:{case[1][:40]}"


@pytest.mark.parametrize("case", INPUTS, ids=_id)
def test_an_input_is_written_back_as_it_was_read(case: tuple[ActivityContract[Any, Any], str]) -> None:
    activity, wire = case
    work = activity.takes.model_validate(json.loads(wire))
    assert json.dumps(work.wire()) == wire


@pytest.mark.parametrize("case", RESULTS, ids=_id)
def test_a_result_is_written_back_as_it_was_read(case: tuple[ActivityContract[Any, Any], str]) -> None:
    activity, wire = case
    result = activity.read_result(json.loads(wire))
    assert json.dumps(result if isinstance(result, str) else result.wire()) == wire


def test_the_wire_form_is_a_plain_json_object_never_a_model() -> None:
    work = contracts.AttemptInput(OrderID="o-1", InstanceID="o-1-1").finishing(
        contracts.FinishOutcome.COMPLETE
    )
    wire = work.wire()
    assert type(wire) is dict
    assert json.dumps(wire) == "{" + IDS + ', "Outcome": "complete", "Error": null}'


def test_a_result_that_is_neither_a_wait_nor_an_ending_is_refused() -> None:
    with pytest.raises(ValueError, match="exactly one of Wait and Ending"):
        contracts.ADVANCE.read_result({})


def test_every_activity_has_one_contract_and_one_function() -> None:
    declared = [c for c in vars(contracts).values() if isinstance(c, ActivityContract)]
    assert sorted(c.name for c in declared) == sorted(Activity)
    registered = [f for f in vars(functions).values() if isinstance(f, functions.ActivityFunction)]
    assert sorted(f.name for f in registered) == sorted(Activity)
    assert all(getattr(functions, f.name.value) is f for f in registered)


def test_the_builders_write_a_nonce_only_when_there_is_one() -> None:
    attempt = contracts.AttemptInput(OrderID="o-1", InstanceID="o-1-1")
    assert json.dumps(attempt.starting("a" * 32).wire()) == "{" + IDS + ", " + NONCE + "}"
    request = contracts.PendingRequest.model_validate(json.loads(RESULTS[0][1])["Wait"])
    reply = AgentReply.model_validate_json(REPLY)
    assert json.dumps(attempt.answering(request, reply, "a" * 32).wire()) == (
        "{" + STEP + ', "Reply": ' + REPLY + ", " + NONCE + "}"
    )
    assert "Nonce" not in attempt.answering(request, reply, None).wire()
    sending = attempt.for_step("ReserveInventory", "ReserveInventory")
    assert "Nonce" not in sending.requesting(request.CompleteBy, 1, {}).wire()
    assert sending.requesting(request.CompleteBy, 1, {}, "a" * 32).wire()["Nonce"] == "a" * 32
