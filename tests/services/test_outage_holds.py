"""The Supervisor and outages (R7): an attempt that ended on an outage costs its order nothing."""

from datetime import timedelta

from adapters.clock import ManualClock
from domain import transitions
from domain.outage import OutageWindow
from domain.policy import RecoveryPolicy, SchedulerPolicy, SupervisorScan
from domain.states import ProcessState
from services.claim_pending import claim_pending
from services.fenced import fenced_update
from services.supervise import supervise
from tests.support.records import expired, pending
from tests.support.stores import Stores

POLICY = SchedulerPolicy()
RECOVERY = RecoveryPolicy()  # 2 quick + 2 extended retries: a 5th counted expiry is Error
SQL = "orders database"


def _attempt_fails_on_the_orders_database(stores: Stores, clock: ManualClock) -> None:
    """The starter claims; the attempt's activity gives up on SQL and notes it, then dies."""
    for claim in claim_pending(stores.states, clock, POLICY, max_in_flight=10, batch_size=10).claims:
        fenced_update(
            stores.states,
            claim.order_id,
            lambda r, instance=claim.instance_id: transitions.note_unavailable(
                r, instance=instance, dependency=SQL, now=clock.now()
            ),
        )


def test_an_outage_longer_than_every_retry_never_sends_a_valid_order_to_error(
    stores: Stores, clock: ManualClock
) -> None:
    stores.states.create_if_absent(pending("o-1", clock.now()))
    windows = [OutageWindow(SQL, clock.now())]  # the Supervisor's process sees it too
    attempts, waited = 0, 0
    for _ in range(600):  # two hours of 10-second Supervisor runs
        _attempt_fails_on_the_orders_database(stores, clock)
        report = supervise(stores.states, clock, RECOVERY, SupervisorScan(), outages=lambda: windows)
        assert not report.recovered and not report.gave_up  # nothing is counted
        attempts += len(report.held)
        waited += report.waiting
        clock.advance(timedelta(seconds=10))
    stored = stores.states.get("o-1")
    assert stored is not None
    assert stored.record.FailureCount == 0 and stored.record.ProcessState is ProcessState.PROCESSING
    # Backing off: 30 s, 60 s, ... then one uncounted try per cool-down (5 min) after its
    # attempt's 60 s; without the back-off there would be one every 70-80 s, about 90.
    assert 10 <= attempts <= 7200 // (60 + 300) + 4 and waited > 400


def test_when_the_dependency_answers_again_the_held_order_goes_back_at_once(
    stores: Stores, clock: ManualClock
) -> None:
    stores.states.create_if_absent(pending("o-1", clock.now()))
    began = clock.now()
    _attempt_fails_on_the_orders_database(stores, clock)
    clock.advance(POLICY.start_grace + timedelta(seconds=1))
    down = [OutageWindow(SQL, began)]
    assert supervise(stores.states, clock, RECOVERY, SupervisorScan(), outages=lambda: down).waiting == 1
    back = [OutageWindow(SQL, began, clock.now())]  # the first success, anywhere in the process
    report = supervise(stores.states, clock, RECOVERY, SupervisorScan(), outages=lambda: back)
    assert [r.outcome.value for r in report.held] == ["held"]
    assert [s.record.OrderID for s in report.restartable] == ["o-1"]
    stored = stores.states.get("o-1")
    assert stored is not None and stored.record.ProcessState is ProcessState.PENDING
    assert stored.record.NotBefore is None and stored.record.FailureCount == 0


def test_an_attempt_that_lived_through_a_state_store_outage_is_not_counted(
    stores: Stores, clock: ManualClock
) -> None:
    """The state store cannot carry a note about itself: the Supervisor's own view of it does."""
    now = clock.now()
    stores.states.create_if_absent(expired("in-it", now, ago=timedelta(minutes=20)))
    stores.states.create_if_absent(expired("before-it", now, ago=timedelta(minutes=45)))
    # The Supervisor's scans failed from 40 to 10 minutes ago; the store answers again now.
    outage = [OutageWindow("state store", now - timedelta(minutes=40), now - timedelta(minutes=10))]
    report = supervise(stores.states, clock, RECOVERY, SupervisorScan(), outages=lambda: outage)
    assert [r.record.OrderID for r in report.held] == ["in-it"]
    assert [r.record.OrderID for r in report.recovered] == ["before-it"]  # expired before: its own
    for order_id, failures in (("in-it", 0), ("before-it", 1)):
        stored = stores.states.get(order_id)
        assert stored is not None and stored.record.FailureCount == failures


def test_an_expiry_of_the_orders_own_still_counts_during_an_outage_of_something_else(
    stores: Stores, clock: ManualClock
) -> None:
    now = clock.now()
    stores.states.create_if_absent(expired("o-1", now, ago=timedelta(minutes=1)))
    elsewhere = [OutageWindow("compensation log", now - timedelta(minutes=50), now - timedelta(minutes=30))]
    report = supervise(stores.states, clock, RECOVERY, SupervisorScan(), outages=lambda: elsewhere)
    assert [r.outcome.value for r in report.recovered] == ["retry"] and not report.held
