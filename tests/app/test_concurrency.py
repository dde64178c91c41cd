"""Two starters and two Supervisors over 500 orders with random agent faults (R10, C1):
every order ends in exactly one terminal state, reported once, with its effects consistent."""

import random
from collections import Counter
from datetime import timedelta

import pytest

from contracts.names import orchestrator_name
from domain.messages import AgentRequest
from domain.states import ProcessState
from services.claim_pending import claim_pending
from services.scheduling import supervise_and_notify
from tests.support.app import App, submission
from tests.support.scripted_agent import OK, Answer

ORDERS = int(__import__("os").environ.get("CONC_ORDERS", "500"))
TERMINAL_STATUSES = {"completed", "failed", "compensated", "compensation-failed"}


class SecondScheduler:
    """Another starter and another Supervisor on the same stores, interleaved with the app's own:
    an older deployment, whose attempts run the first engine (``order_workflow_v1``) beside the
    app's ``order_attempt`` ones, on the same records (C7)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.ports = app.ports()
        self.claimed = 0

    def step(self) -> int:
        settings = self.ports.settings
        report = claim_pending(
            self.ports.states, self.ports.clock, settings.scheduler_policy, max_in_flight=60, batch_size=7
        )
        for claim in report.claims:
            self.app.host.engine.start(
                orchestrator_name(claim.workflow_version),
                claim.instance_id,
                f'{{"OrderID": "{claim.order_id}"}}',
            )
        supervision = supervise_and_notify(self.ports)
        self.claimed += len(report.claims)
        return len(report.claims) + len(supervision.recovered) + len(supervision.gave_up)

    def next_due(self) -> None:
        return None


# Cumulative probabilities of each fault; the rest of the requests are answered at once.
FAULTS = (
    (0.08, Answer("silent")),
    (0.12, Answer("transient")),
    (0.17, Answer("permanent")),  # forward steps and compensations alike
    (0.22, Answer("ok", copies=2)),
    (0.26, Answer("ok", delay=timedelta(minutes=2))),  # after the step's CompleteBy
)


def faulty(seed: int):  # type: ignore[no-untyped-def]
    rng = random.Random(seed)

    def script(request: AgentRequest, n: int) -> Answer:
        roll = rng.random()
        return next((answer for limit, answer in FAULTS if roll < limit), OK)

    return script


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Potential duplicate Task completion:UserWarning")
def test_every_order_ends_in_exactly_one_terminal_state(app: App) -> None:
    app.agent.script = faulty(seed=7)
    second = SecondScheduler(app)
    app.host.extra_sources.append(second)
    rng = random.Random(11)
    ids = [f"c-{n:03d}" for n in range(ORDERS)]
    for order_id in ids:
        sku = rng.choice(["SKU-1"] * 18 + ["BLOCKED-1", "BACKORDER-1"])
        app.submit(submission(order_id, sku=sku, app=rng.choice(["app-a", "app-b"])))
    app.run_until_terminal(*ids, days=5)
    assert second.claimed > 0  # the second starter really took part

    states = Counter(app.record(i).ProcessState for i in ids)
    assert sum(states.values()) == ORDERS
    assert states[ProcessState.PROCESSED] > ORDERS // 2
    statuses = app.statuses("status-app-a") + app.statuses("status-app-b")
    terminal = Counter(s["OrderID"] for s in statuses if s["Status"] in TERMINAL_STATUSES)
    received = Counter(s["OrderID"] for s in statuses if s["Status"] == "received")
    assert terminal == Counter(ids), "every order reports exactly one end"
    assert received == Counter(ids)
    agent = app.agent
    for order_id in ids:
        record = app.record(order_id)
        if record.ProcessState is ProcessState.PROCESSED:
            assert agent.net_effect(order_id, "ReserveInventory") == 1
            assert agent.net_effect(order_id, "ChargePayment") == 1
            assert agent.net_effect(order_id, "ReleaseInventory") == 0
            assert agent.net_effect(order_id, "RefundPayment") == 0
        if record.ProcessState is ProcessState.COMPENSATED:  # net zero
            for done, undo in (("ReserveInventory", "ReleaseInventory"), ("ChargePayment", "RefundPayment")):
                # Every step whose request went out is undone, done or refused; this double
                # books an undo of nothing as an effect, where a real service does nothing.
                went_out = any(r.OrderID == order_id and r.Step == done for r in agent.requests)
                assert agent.net_effect(order_id, undo) == int(went_out)
                assert agent.net_effect(order_id, done) <= agent.net_effect(order_id, undo)
