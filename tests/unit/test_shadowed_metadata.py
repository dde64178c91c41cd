"""services.intake.shadowed_metadata: which trigger metadata a body sets, decided on the keys
as JSON decodes them (the Functions host binds them after decoding, case-insensitively). The same
bodies run through devhost's binding in tests/app/test_trigger_metadata.py."""

import json

import pytest

from services.intake import TRIGGER_METADATA, shadowed_metadata
from tests.support.app import submission

ORDER = submission("o-1").model_dump_json()


def _escaped(name: str) -> str:
    """``name`` with its first letter as a JSON ``\\uXXXX`` escape."""
    return f"\\u{ord(name[0]):04x}{name[1:]}"


@pytest.mark.parametrize("name", TRIGGER_METADATA)
def test_every_bound_key_is_found_plain_lowercased_and_escaped(name: str) -> None:
    for spelling in (name, name.lower(), name.upper(), _escaped(name), _escaped(name.lower())):
        body = f'{{"{spelling}": 1, {ORDER[1:]}'.encode()
        assert shadowed_metadata(body) == [name], spelling


def test_the_issues_bodies_are_found() -> None:
    assert shadowed_metadata(b'{"\\u0044eliveryCount": 99}') == ["DeliveryCount"]
    assert shadowed_metadata(b'{"\\u004cockToken": "x", "\\u004d\\u0065ssageId": "y"}') == [
        "LockToken",
        "MessageId",
    ]


def test_an_order_and_bodies_that_only_mention_the_names_shadow_nothing() -> None:
    assert shadowed_metadata(ORDER.encode()) == []
    nested = json.dumps({"OrderID": "o-1", "Payload": {"DeliveryCount": 1, "To": "x"}, "Note": "LockToken"})
    assert shadowed_metadata(nested.encode()) == []  # only top-level properties are bound
    assert shadowed_metadata(b'{"Note": "a \\u0022back\\u0022slash"}') == []
    assert shadowed_metadata(b'["DeliveryCount"]') == []
    assert shadowed_metadata(b'{"DeliveryCount": ') == []  # not JSON: the host binds nothing from it
