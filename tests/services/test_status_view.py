"""What a submitter's status URL shows of a record: the store's own markers stay inside."""

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import cast

from domain import transitions
from domain.policy import SchedulerPolicy
from services.context import Ports
from services.frontend import record_view
from tests.support.records import processing
from tests.support.stores import Stores

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _view(stores: Stores, order_id: str) -> dict[str, object]:
    ports = cast(Ports, SimpleNamespace(states=stores.states))
    reply = record_view(order_id, ports, owner=None)
    assert reply.status == 200
    return dict(reply.body)


def test_an_order_that_failed_before_its_first_step_names_no_step(stores: Stores) -> None:
    claimed = processing("o-1", NOW)
    failed = transitions.fail(claimed, instance=str(claimed.LockedBy), now=NOW, error="order row unreadable")
    assert failed.FailedStep == "$start"  # the store's marker, which the view must not show
    stores.states.create_if_absent(failed)
    body = _view(stores, "o-1")
    assert body["ProcessState"] == "Error" and body["FailedStep"] is None
    assert body["LastError"] == "order row unreadable"


def test_an_order_that_failed_in_a_step_names_it(stores: Stores) -> None:
    policy = SchedulerPolicy()
    claimed = processing("o-2", NOW, policy)
    begun = transitions.begin_step(
        claimed, instance=str(claimed.LockedBy), step="Charge", now=NOW, policy=policy
    ).record
    failed = transitions.fail(begun, instance=str(begun.LockedBy), now=NOW, error="card declined")
    stores.states.create_if_absent(failed)
    assert _view(stores, "o-2")["FailedStep"] == "Charge"
