"""The shipped JSON Schema of an order is the one the front end enforces, and it refuses what
the front end refuses wherever JSON Schema can say so."""

import json

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from domain.messages import InvalidMessage, OrderSubmission, parse_message
from harness.tools.order_schema import SCHEMA_FILE, render
from tests.support.orders import body, line

SCHEMA = json.loads(SCHEMA_FILE.read_text())
VALIDATOR = Draft202012Validator(SCHEMA, format_checker=FormatChecker())


def test_the_shipped_schema_is_generated_from_the_model_and_valid() -> None:
    assert SCHEMA_FILE.read_text() == render(), "run: python -m harness.tools.order_schema"
    Draft202012Validator.check_schema(SCHEMA)


def test_a_valid_order_passes_the_schema_and_the_model() -> None:
    VALIDATOR.validate(json.loads(body()))
    parse_message(OrderSubmission, body())


@pytest.mark.parametrize(
    "text",
    [
        line(Quantity="2"),
        line(UnitPrice="12.50"),
        line(Quantity=0),
        body(Customer="Con\u0000toso"),
        body(Customer="Con\u0007toso"),
        body(Unexpected=1),
        body(Lines=[]),
        body(OrderID="a/b"),
        body(SubmittedBy="app-b"),  # the identity is not the caller's to state
        json.dumps({k: v for k, v in json.loads(body()).items() if k != "Total"}),
    ],
)
def test_what_the_schema_refuses_the_model_refuses(text: str) -> None:
    assert not VALIDATOR.is_valid(json.loads(text))
    with pytest.raises(InvalidMessage):
        parse_message(OrderSubmission, text)
