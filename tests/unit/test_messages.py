"""Message contracts: what is accepted, and the reasons for what is not."""

import json
from datetime import timedelta

import pytest

from adapters.servicebus.limits import DEAD_LETTER_TEXT_LENGTH
from domain.errors import InvalidOrderId
from domain.ids import (
    idempotency_key,
    instance_id,
    parse_instance_id,
    request_message_id,
    validate_order_id,
)
from domain.messages import (
    DESCRIPTION_CHARS,
    MAX_MESSAGE_BYTES,
    AgentReply,
    AgentRequest,
    InvalidMessage,
    OrderSubmission,
    QueuedOrder,
    parse_message,
)
from tests.support.clock import T0
from tests.support.orders import body, line, make_submission


def test_a_valid_submission_parses() -> None:
    parsed = parse_message(OrderSubmission, body())
    assert parsed.model_dump() == make_submission().model_dump(exclude={"SubmittedBy"})


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"OrderID": "a/b"}, "OrderID"),
        ({"OrderID": "x" * 65}, "OrderID"),
        ({"OrderID": "bad?id"}, "OrderID"),
        ({"Total": 99.0}, "does not equal the sum"),
        ({"StatusQueue": "Not A Queue"}, "StatusQueue"),
        ({"Lines": []}, "Lines"),
        ({"Unexpected": 1}, "Unexpected"),
        ({"SubmittedAt": "2026-01-01T00:00:00"}, "SubmittedAt"),
    ],
)
def test_invalid_submissions_are_refused_with_a_reason(changes: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidMessage) as caught:
        parse_message(OrderSubmission, body(**changes))
    assert caught.value.reason == "InvalidSchema"
    assert fragment in caught.value.description


def test_malformed_and_oversized_bodies_are_refused() -> None:
    with pytest.raises(InvalidMessage) as caught:
        parse_message(OrderSubmission, b"{not json")
    assert caught.value.reason == "InvalidSchema"
    with pytest.raises(InvalidMessage) as caught:
        parse_message(OrderSubmission, b" " * (MAX_MESSAGE_BYTES + 1))
    assert caught.value.reason == "MessageTooLarge"


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b"\xff{not json", "byte 0xff at offset 0 (invalid start byte)"),
        # A valid order but for one Latin-1 byte: read lossily, as U+FFFD, it would pass the schema.
        (body().encode().replace(b'"Contoso"', b'"Caf\xe9"'), "byte 0xe9 at offset"),
        (b'{"OrderID": "o-1\xed\xa0\x80"}', "byte 0xed at offset 16"),  # a UTF-16 surrogate, as UTF-8
    ],
)
def test_a_body_that_is_not_utf8_is_refused_as_such(raw: bytes, where: str) -> None:
    with pytest.raises(InvalidMessage) as caught:
        parse_message(OrderSubmission, raw)
    assert caught.value.reason == "InvalidEncoding"
    assert (
        caught.value.description.startswith("the body is not UTF-8 JSON: ")
        and where in caught.value.description
    )


def test_the_order_hash_covers_the_immutable_data_only() -> None:
    base = make_submission()
    assert make_submission(submitted_at=T0 + timedelta(hours=1)).order_hash() == base.order_hash()
    assert make_submission(quantity=3).order_hash() != base.order_hash()
    assert make_submission(app="app-b").order_hash() != base.order_hash()


def test_an_agent_reply_has_an_error_exactly_when_it_failed() -> None:
    ok = {"RequestID": "Reserve:" + "0" * 32, "InstanceID": "o-1-1", "Step": "Reserve", "Outcome": "ok"}
    assert parse_message(AgentReply, json.dumps(ok)).Error is None
    with pytest.raises(InvalidMessage):
        parse_message(AgentReply, json.dumps({**ok, "Outcome": "permanent"}))
    with pytest.raises(InvalidMessage):
        parse_message(AgentReply, json.dumps({**ok, "Error": "boom"}))


@pytest.mark.parametrize("instance", ["o1", "o-1-x", "-1", "o-1-"])
def test_an_agent_reply_for_no_attempt_is_refused_with_a_reason(instance: str) -> None:
    # The reply listener reads the order from the instance ID: one it cannot read is dead-lettered.
    reply = {"RequestID": "Reserve:" + "0" * 32, "InstanceID": instance, "Step": "Reserve", "Outcome": "ok"}
    with pytest.raises(InvalidMessage, match="InstanceID"):
        parse_message(AgentReply, json.dumps(reply))


def test_identifiers_derived_from_the_order_id() -> None:
    assert validate_order_id("Order_42-a") == "Order_42-a"
    for bad in ("", "-lead", "a:b", "a#b", "a\nb", "ü"):
        with pytest.raises(InvalidOrderId):
            validate_order_id(bad)
    assert instance_id("o-1", 3) == "o-1-3"
    assert parse_instance_id("o-1-3") == ("o-1", 3)
    assert idempotency_key("o-1", "Charge") == "o-1:Charge"
    assert request_message_id("o-1-3", "Charge") == "o-1-3:Charge"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (line(Quantity="2"), "Quantity"),  # a string is not a quantity, even one that looks like it
        (line(Quantity=2.0), "Quantity"),
        (line(Quantity=True), "Quantity"),
        (line(UnitPrice="12.50"), "UnitPrice"),  # money is a JSON number, never a string
        (line(UnitPrice=12.505), "UnitPrice"),  # at most cents
        (body(Total="25.00"), "Total"),
        (body(Customer="Con\u0000toso"), "Customer"),
        (body(Customer="Con\ntoso"), "Customer"),
        (body(Customer="Con\u009btoso"), "Customer"),  # C1 controls too
        (body(OrderID=12345), "OrderID"),
    ],
)
def test_submissions_are_strict_no_coercion_and_no_control_characters(text: str, fragment: str) -> None:
    with pytest.raises(InvalidMessage) as caught:
        parse_message(OrderSubmission, text)
    assert fragment in caught.value.description


def test_money_keeps_its_cents_end_to_end() -> None:
    """A number without trailing zeros is still an amount to the cent, written with both digits;
    and the queued form reads back exactly what the front end wrote."""
    parsed = parse_message(
        OrderSubmission, line(UnitPrice=10, Quantity=3).replace('"Total": 25.0', '"Total": 30')
    )
    assert str(parsed.Lines[0].UnitPrice) == "10.00" and str(parsed.Total) == "30.00"
    queued = make_submission()
    assert parse_message(QueuedOrder, queued.model_dump_json()) == queued
    assert json.loads(queued.model_dump_json())["Total"] == 25.0  # a JSON number, not "25.00"


def test_a_hostile_bodys_dead_letter_description_fits_service_bus() -> None:
    # Ten unknown keys of 2,000 characters each: pydantic names every one in its errors.
    hostile = json.dumps({f"{'k' * 2000}{n}": 1 for n in range(10)})
    with pytest.raises(InvalidMessage) as raised:
        parse_message(AgentRequest, hostile)
    description = raised.value.description
    assert raised.value.reason == "InvalidSchema" and description.startswith("AgentRequest: ")
    assert isinstance(DEAD_LETTER_TEXT_LENGTH.high, int)
    assert len(description) <= DESCRIPTION_CHARS < DEAD_LETTER_TEXT_LENGTH.high
