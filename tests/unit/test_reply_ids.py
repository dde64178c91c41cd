"""Every ID a reply carries is checked against its alphabet before it is used, and the event name
it is raised as encodes its RequestID injectively (E9, issue 24)."""

import json
import re

import pytest

from domain.ids import (
    EVENT_NAME_PATTERN,
    INSTANCE_ID_PATTERN,
    parse_instance_id,
    reply_event,
    request_id,
    request_message_id,
    request_nonce,
    url_segment,
)
from domain.messages import AgentReply, InvalidMessage, parse_message

NONCE = request_nonce("seed", "salt")
RESERVE = request_id("ReserveInventory", NONCE)

HOSTILE_INSTANCES = [
    "o-1-1/terminate?reason=x&x=-1",  # digits after its last "-": passed the old check
    "o-1-1/../../terminate",
    "o-1-1?x=-1",
    "o-1%2F1-1",
    "o-1-1%2F",
    "..-1",
    "ö-1",
    "o-１",  # a full-width digit: str.isdigit() says yes
    "o-1-1\n",
    "o" * 65 + "-1",
    "o-1-" + "1" * 10,
    "",
]
HOSTILE_REQUEST_IDS = [
    "x/../../terminate?reason=gone",
    f"ReserveInventory:{NONCE}/raiseEvent/x",
    f"ReserveInventory:{NONCE}?x=1",
    f"ReserveInventory%3A{NONCE}",
    f"ReserveInventory:{NONCE}%2F",
    f"ReserveInventory.{NONCE}",  # the "."-for-":" twin
    "o-1-1.ReserveInventory",  # the legacy twin
    f"ReserveInventory:{NONCE.upper()}",
    f"ReserveInventory:{NONCE}0",
    f"ReserveInventory:{NONCE[:-1]}",
    f"Résérve:{NONCE}",
    f"ReserveInventory:{NONCE}:{NONCE}",
    "A" * 200 + ":" + NONCE,
    "",
]


@pytest.mark.parametrize("instance", HOSTILE_INSTANCES)
def test_a_hostile_instance_id_is_no_attempts_id_and_never_a_url_segment(instance: str) -> None:
    with pytest.raises(ValueError, match="instance ID"):
        parse_instance_id(instance)
    with pytest.raises(ValueError, match="URL"):
        url_segment(instance, INSTANCE_ID_PATTERN)
    reply = {"RequestID": RESERVE, "InstanceID": instance, "Step": "ReserveInventory", "Outcome": "ok"}
    with pytest.raises(InvalidMessage, match="InstanceID") as refused:
        parse_message(AgentReply, json.dumps(reply))
    assert refused.value.reason == "InvalidSchema"


@pytest.mark.parametrize("rid", HOSTILE_REQUEST_IDS)
def test_a_hostile_request_id_names_no_event_and_its_reply_is_refused(rid: str) -> None:
    with pytest.raises(ValueError, match="request ID"):
        reply_event(rid)
    reply = {"RequestID": rid, "InstanceID": "o-1-1", "Step": "ReserveInventory", "Outcome": "ok"}
    with pytest.raises(InvalidMessage, match="RequestID") as refused:
        parse_message(AgentReply, json.dumps(reply))
    assert refused.value.reason == "InvalidSchema"


@pytest.mark.parametrize(
    ("rid", "instance", "step"),
    [
        (RESERVE, "o-1-1", "ChargePayment"),  # another action than its Step
        (request_message_id("o-1-0", "ReserveInventory"), "o-1-1", "ReserveInventory"),  # other instance
        (request_message_id("o-1-1", "ChargePayment"), "o-1-1", "ReserveInventory"),
    ],
)
def test_a_reply_whose_ids_disagree_is_refused(rid: str, instance: str, step: str) -> None:
    reply = {"RequestID": rid, "InstanceID": instance, "Step": step, "Outcome": "ok"}
    with pytest.raises(InvalidMessage, match="another") as refused:
        parse_message(AgentReply, json.dumps(reply))
    assert refused.value.reason == "InvalidSchema"


def test_event_names_encode_the_request_id_injectively_and_need_no_escaping() -> None:
    nonced = [
        request_id(a, request_nonce(str(n), salt))
        for a in ("A", "B")
        for n in range(50)
        for salt in ("", "s")
    ]
    legacy = [request_message_id(f"o-{n}-{a}", s) for n in range(3) for a in (1, 2) for s in ("A", "B")]
    names = {rid: reply_event(rid) for rid in nonced + legacy}
    assert len(set(names.values())) == len(names) == len(nonced) + len(legacy)
    assert all(EVENT_NAME_PATTERN.fullmatch(name) for name in names.values())
    assert all(url_segment(name, EVENT_NAME_PATTERN) == name for name in names.values())  # nothing to escape
    # A legacy name (an instance, which always holds "-", then an action) and a new one (an
    # action, which never does, then a nonce) cannot meet.
    assert all("-" not in names[rid].split(".")[1] for rid in nonced)
    assert all("-" in names[rid].split(".")[1] for rid in legacy)


def test_a_nonce_is_128_bits_of_hex_that_depends_on_the_salt() -> None:
    assert re.fullmatch(r"[0-9a-f]{32}", NONCE)
    assert request_nonce("seed", "salt") == NONCE  # deterministic: replay-safe
    assert request_nonce("seed", "other") != NONCE and request_nonce("other", "salt") != NONCE
    with pytest.raises(ValueError):
        request_id("ReserveInventory", "not-a-nonce")
    assert len(request_id("A" * 64, NONCE) + ":reply") <= 128  # the Agent's reply MessageId fits


def test_a_valid_id_is_its_own_url_segment_and_anything_else_is_refused() -> None:
    assert url_segment("Order_42-a-3", INSTANCE_ID_PATTERN) == "Order_42-a-3"
    assert parse_instance_id("Order_42-a-3") == ("Order_42-a", 3)
    for bad in ("a/b-1", "a%2Fb-1", "a b-1", "a-1 "):
        with pytest.raises(ValueError):
            url_segment(bad, INSTANCE_ID_PATTERN)
