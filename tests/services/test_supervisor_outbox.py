"""The Supervisor's outbox (E15): a give-up is written with ``NoticePending``, so that a send that
fails — or a crash between the write and the send — is told on a later run, exactly as it would
have been, and never twice once told."""

import asyncio
import dataclasses
import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.clock import ManualClock
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import QueueConfig
from bootstrap import build_ports
from domain import transitions
from domain.dependencies import SERVICE_BUS, STATE_STORE
from domain.endings import Part
from domain.errors import DependencyUnavailable
from domain.ports import MessageSender
from domain.states import ProcessState
from services.context import Ports
from services.scheduling import refill, supervise_and_notify
from services.submit_order import submit_order
from settings import Settings
from tests.support.clock import T0
from tests.support.orders import make_submission

QUEUES = ("status-app-a", "operator-alerts")


class BrokenSender:
    def send(self, queue: str, body: str, **_: object) -> None:
        raise ConnectionError("injected: Service Bus is unreachable")


@pytest.fixture
def ports(tmp_path: Path) -> Iterator[Ports]:
    bus = LocalServiceBus(tmp_path / "sb.db")
    for queue in QUEUES:
        bus.declare(QueueConfig(queue))
    settings = Settings.from_env(
        {
            "SAS_DATA_DIR": str(tmp_path / "data"),
            "LOCAL_SERVICEBUS_PATH": str(tmp_path / "sb.db"),
            "SAS_QUICK_RETRIES": "0",
            "SAS_EXTENDED_RETRIES": "0",  # the first expiry gives up
            "SAS_SUBMITTERS": "app-a=11111111-1111-1111-1111-111111111111",
        }
    )
    yield build_ports(settings, ManualClock(T0))
    bus.close()


def _told(ports: Ports) -> dict[str, list[str]]:
    bus = LocalServiceBus(Path(ports.settings.local_servicebus_path))
    try:
        return {q: [json.loads(m.body)["OrderID"] for m in bus.peek(q, 100)] for q in QUEUES}
    finally:
        bus.close()


def _with_sender(ports: Ports, sender: MessageSender) -> Ports:
    return dataclasses.replace(ports, sender=sender)


def _accepted_then_abandoned(ports: Ports, order_id: str) -> None:
    """Submitted (SQL row and state record), claimed, and then its orchestration vanished."""
    policy = ports.settings.scheduler_policy
    submit_order(
        make_submission(order_id),
        orders=ports.orders,
        states=ports.states,
        clock=ports.clock,
        policy=policy,
        submitters=ports.settings.submitters,
        workflow_version="v1",
    )
    stored = ports.states.get(order_id)
    assert stored is not None
    ports.states.replace(transitions.claim(stored.record, now=ports.clock.now(), policy=policy), stored.etag)
    assert isinstance(ports.clock, ManualClock)
    ports.clock.advance(policy.start_grace + timedelta(seconds=1))


def test_a_give_up_whose_notice_failed_is_told_on_the_next_run_and_only_once(ports: Ports) -> None:
    _accepted_then_abandoned(ports, "o-1")
    first = supervise_and_notify(_with_sender(ports, BrokenSender()))
    assert [r.record.OrderID for r in first.gave_up] == ["o-1"]
    stored = ports.states.get("o-1")
    assert stored is not None
    assert stored.record.ProcessState is ProcessState.ERROR and stored.record.NoticePending
    assert _told(ports) == {"status-app-a": [], "operator-alerts": []}

    supervise_and_notify(ports)  # the sender works again
    assert _told(ports) == {"status-app-a": ["o-1"], "operator-alerts": ["o-1"]}
    stored = ports.states.get("o-1")
    assert stored is not None and not stored.record.NoticePending
    assert ports.states.query_pending_notices(10) == []

    supervise_and_notify(ports)
    assert _told(ports) == {"status-app-a": ["o-1"], "operator-alerts": ["o-1"]}


def test_a_crash_between_the_give_up_and_its_notice_is_told_on_the_next_run(ports: Ports) -> None:
    """The write landed and the process died before telling: nothing but the record remembers."""
    _accepted_then_abandoned(ports, "o-1")
    stored = ports.states.get("o-1")
    assert stored is not None
    gave_up = transitions.recover_expired(
        stored.record,
        expected_locked_by=stored.record.LockedBy or "",
        now=ports.clock.now(),
        policy=ports.settings.scheduler_policy.recovery,
    )
    ports.states.replace(gave_up.record, stored.etag)  # ... and the process dies here
    assert _told(ports) == {"status-app-a": [], "operator-alerts": []}
    supervise_and_notify(ports)
    assert _told(ports) == {"status-app-a": ["o-1"], "operator-alerts": ["o-1"]}


class StoreDown:
    """Fault injection: every call to the state store gives up, as its guard reports it."""

    def __getattr__(self, name: str) -> object:
        def unavailable(*_: object, **__: object) -> object:
            raise DependencyUnavailable(STATE_STORE, "injected: the connection stalled")

        return unavailable


class NeverStarts:
    async def start_new(self, name: str, instance_id: str | None = None, client_input: object = None) -> str:
        raise AssertionError("nothing may start while the store is down")


def test_an_expected_outage_is_one_warning_line_naming_the_dependency(
    ports: Ports, caplog: pytest.LogCaptureFixture
) -> None:
    down = dataclasses.replace(ports, states=StoreDown())
    with caplog.at_level(logging.DEBUG, logger="sas"):
        assert asyncio.run(refill(NeverStarts(), down, ended="o-9-1")) is None
    [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.levelno == logging.WARNING and line.exc_info is None
    assert "the state store is unavailable" in line.getMessage()


def test_an_ending_whose_telling_meets_an_outage_logs_one_line_and_keeps_it(
    ports: Ports, caplog: pytest.LogCaptureFixture
) -> None:
    _accepted_then_abandoned(ports, "o-1")
    broken = _with_sender(ports, UnavailableSender())
    with caplog.at_level(logging.DEBUG, logger="sas"):
        supervise_and_notify(broken)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.exc_info for r in warnings] == [None], [r.getMessage() for r in warnings]
    assert "Service Bus is unavailable" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.levelno > logging.WARNING and r.exc_info]
    stored = ports.states.get("o-1")
    assert stored is not None and stored.record.Untold is not None
    assert stored.record.Untold.parts() == (Part.STATUS, Part.ALERT)  # the orders row was told


class UnavailableSender:
    def send(self, queue: str, body: str, **_: object) -> None:
        raise DependencyUnavailable(SERVICE_BUS, "injected: the namespace does not answer")
