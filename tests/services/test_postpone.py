"""Back-off across deliveries: a submission whose store stays down past the retry budget comes
back later on a scheduled copy of its message, never at once, and is dead-lettered only past the
postponement limit."""

import dataclasses
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.clock import ManualClock
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.local_messaging import LocalMessaging
from adapters.servicebus.messages import QueueConfig, ReceivedMessage
from bootstrap import build_ports
from domain import transitions
from domain.errors import DependencyUnavailable, IllegalTransition
from domain.states import ProcessState
from services.context import Ports
from services.intake import FIRST_MESSAGE_ID, POSTPONED, HeldMessage, handle_submission, postpone
from services.operator import resubmit
from services.submit_order import SubmitOutcome
from settings import Settings
from tests.support.app import CLIENT_IDS
from tests.support.clock import T0
from tests.support.orders import make_submission

OUTAGE = DependencyUnavailable("orders database", "OperationalError: could not connect to server")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def bus(tmp_path: Path, clock: ManualClock) -> Iterator[LocalServiceBus]:
    bus = LocalServiceBus(tmp_path / "sb.db", clock=clock.now)
    for queue in ("orders", "operator-alerts"):
        bus.declare(QueueConfig(queue))
    yield bus
    bus.close()


def ports_for(tmp_path: Path, clock: ManualClock, **settings: str) -> Ports:
    env = {
        "SAS_DATA_DIR": str(tmp_path / "data"),
        "LOCAL_SERVICEBUS_PATH": str(tmp_path / "sb.db"),
        **{f"SAS_{key.upper()}": value for key, value in settings.items()},
    }
    built = build_ports(Settings.from_env(env), clock)
    messaging = LocalMessaging(tmp_path / "sb.db", clock.now)
    return dataclasses.replace(built, sender=messaging, settlement=messaging)


def deliver(bus: LocalServiceBus) -> HeldMessage:
    [message] = bus.receive("orders")
    return held_message(message)


def held_message(message: ReceivedMessage) -> HeldMessage:
    return HeldMessage(
        queue="orders",
        message_id=message.message_id,
        lock_token=message.lock_token,
        body=message.body,
        properties=message.application_properties,
    )


def test_a_postponed_submission_comes_back_after_a_growing_delay(
    tmp_path: Path, clock: ManualClock, bus: LocalServiceBus
) -> None:
    ports = ports_for(tmp_path, clock)
    order = make_submission("o-1")
    bus.send("orders", order.model_dump_json(), message_id="o-1.abc")
    first = deliver(bus)

    postpone(first, OUTAGE, ports)
    assert bus.receive("orders") == []  # the copy is not visible yet: no redelivery at once
    clock.advance(timedelta(seconds=5))
    copy = deliver(bus)
    assert copy.message_id == "o-1.abc.p1"  # its own MessageId: duplicate detection keeps it
    assert json.loads(copy.body) == json.loads(order.model_dump_json())
    assert copy.properties == {POSTPONED: "1", FIRST_MESSAGE_ID: "o-1.abc"}

    postpone(copy, OUTAGE, ports)
    clock.advance(timedelta(seconds=9))
    assert bus.receive("orders") == []
    clock.advance(timedelta(seconds=1))  # the second wait is twice the first
    again = deliver(bus)
    assert again.message_id == "o-1.abc.p2"
    assert again.properties == {POSTPONED: "2", FIRST_MESSAGE_ID: "o-1.abc"}


def test_past_the_limit_the_submission_is_dead_lettered_with_the_outage(
    tmp_path: Path, clock: ManualClock, bus: LocalServiceBus
) -> None:
    ports = ports_for(tmp_path, clock, postpone_limit="1")
    bus.send(
        "orders",
        make_submission("o-2").model_dump_json(),
        message_id="o-2.abc.p1",
        application_properties={POSTPONED: "1", FIRST_MESSAGE_ID: "o-2.abc"},
    )
    postpone(deliver(bus), OUTAGE, ports)
    [dead] = bus.peek("orders/$deadletterqueue")
    assert dead.dead_letter_reason == "DependencyUnavailable"
    assert "orders database is unavailable" in (dead.dead_letter_error_description or "")
    assert "postponed 1 times" in (dead.dead_letter_error_description or "")
    [alert] = [json.loads(m.body) for m in bus.peek("operator-alerts")]
    assert alert["Event"] == "SubmissionRejected"
    assert bus.peek("orders") == []  # no copy: given up, for an operator to resubmit


def test_a_held_order_whose_copies_ran_out_ends_in_error_and_its_dead_letter_brings_it_in(
    tmp_path: Path, clock: ManualClock, bus: LocalServiceBus
) -> None:
    """Issue 37: an order answered 202 while the orders database was down has a held record; when
    its submission's copies run out, the record must not stay Pending for ever. It ends in Error
    (unclaimable: no order row), the alert names the order, and a copy of the submission (the
    operator's resubmit of the dead letter) writes the row and releases it: nothing accepted lost."""
    ports = ports_for(tmp_path, clock, postpone_limit="1", submitters=f"app-a={CLIENT_IDS['app-a']}")
    order = make_submission("o-3")
    settings = ports.settings
    record = transitions.create(
        order.OrderID,
        status_queue=order.status_queue,
        order_hash=order.order_hash(),
        now=clock.now(),
        policy=settings.scheduler_policy,
        workflow_version=settings.workflow_version,
    )
    # What the first delivery wrote when it could not write the order row (submit_order._hold).
    ports.states.create_if_absent(transitions.awaiting_order_row(record, "orders database"))
    bus.send(
        "orders",
        order.model_dump_json(),
        message_id="o-3.abc.p1",
        application_properties={POSTPONED: "1", FIRST_MESSAGE_ID: "o-3.abc"},
    )
    postpone(deliver(bus), OUTAGE, ports)

    [dead] = bus.peek("orders/$deadletterqueue")
    assert dead.dead_letter_reason == "DependencyUnavailable"
    assert "ops dlq resubmit orders o-3.abc.p1" in (dead.dead_letter_error_description or "")
    [alert] = [json.loads(m.body) for m in bus.peek("operator-alerts")]
    assert (alert["Event"], alert["OrderID"]) == ("SubmissionRejected", "o-3")
    ended = ports.states.get("o-3")
    assert ended is not None
    assert ended.record.ProcessState is ProcessState.ERROR
    assert "dead-lettered on orders as message o-3.abc.p1" in (ended.record.LastError or "")
    assert not transitions.is_claimable(ended.record, clock.now() + timedelta(days=3650))
    with pytest.raises(IllegalTransition, match="no order row"):
        resubmit(ports.states, clock, "o-3")  # ops resubmit: the lines are in the dead letter only

    # The database is back; the operator resubmits the dead letter.
    bus.declare(QueueConfig(order.status_queue))
    assert ports.settlement.resubmit_dead_letter("orders", "o-3.abc.p1")  # type: ignore[attr-defined]
    result = handle_submission(deliver(bus), ports)
    assert result is not None and result.outcome is SubmitOutcome.ACCEPTED
    released = ports.states.get("o-3")
    assert released is not None and transitions.is_claimable(released.record, clock.now())
    assert (released.record.Unavailable, released.record.LastError) == (None, None)
    row = ports.orders.get("o-3")
    assert row is not None and row.OrderHash == order.order_hash()


def test_an_outage_reaches_the_operators_queue_once(
    tmp_path: Path, clock: ManualClock, bus: LocalServiceBus
) -> None:
    ports = build_ports(
        Settings.from_env(
            {"SAS_DATA_DIR": str(tmp_path / "data"), "LOCAL_SERVICEBUS_PATH": str(tmp_path / "sb.db")}
        ),
        clock,
    )
    assert ports.outages is not None
    for _ in range(3):  # three calls gave up during one outage
        ports.outages.unavailable("orders database", ConnectionRefusedError("refused"))
    [alert] = [json.loads(m.body) for m in bus.peek("operator-alerts")]
    assert alert["Event"] == "DependencyUnavailable"
    assert alert["Reason"].startswith("the orders database is unavailable: refused")
