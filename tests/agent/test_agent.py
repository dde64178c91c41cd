"""The Agent against the real simulator (R2-R4, C2, C10): retries within the deadline and the
attempt limit, permanent errors at once, the circuit breaker, lock renewal, bad requests, and
a crash between the remote effect and the reply."""

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from adapters.servicebus.agent_queues import LocalAgentMessaging
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import QueueConfig
from agent_worker.remote import RemoteService
from agent_worker.settings import AgentSettings
from agent_worker.worker import Agent
from domain.messages import AgentRequest
from harness.demo.stack import Stack, http_json, wait_for
from simulator.app import SIMULATOR
from simulator.profile import FaultProfile
from tests.support.simulator import start_simulator

REQUESTS, REPLIES = "agent-requests", "agent-replies"
POLL = 0.02  # seconds between looks at the clock while a scenario's time passes


class Rig:
    """The simulator in-process, a local Service Bus, and an Agent with fast settings."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tmp_path: Path, **settings: Any) -> None:
        self.loop = loop
        self.app, self.runner, port = start_simulator(loop, tmp_path)
        self.bus = LocalServiceBus(
            tmp_path / "sb.db",
            [
                QueueConfig(REQUESTS, max_delivery_count=2, lock_duration=timedelta(seconds=30)),
                QueueConfig(REPLIES),
            ],
        )
        values = {
            "AGENT_BACKOFF_INITIAL_SECONDS": 0.02,
            "AGENT_BACKOFF_MAX_SECONDS": 0.1,
            "AGENT_CALL_TIMEOUT_SECONDS": 2,
            "AGENT_REMOTE_URL": f"http://127.0.0.1:{port}",
        } | settings
        self.settings = AgentSettings.model_validate(values)
        self.agent = Agent(
            self.settings,
            LocalAgentMessaging(self.bus, REQUESTS, REPLIES),
            RemoteService(self.settings.remote_url, self.settings.call_timeout_seconds),
        )

    def profile(self, **faults: Any) -> None:
        simulator = self.app[SIMULATOR]
        simulator.profile = FaultProfile.model_validate(faults)
        simulator.rng.seed(faults.get("seed"))

    def request(
        self, key: str, *, step: str = "ReserveInventory", attempts: int = 5, seconds: float = 10
    ) -> AgentRequest:
        order_id = key.split(":", 1)[0]
        request = AgentRequest(
            RequestID=f"{order_id}-1:{step}",
            InstanceID=f"{order_id}-1",
            OrderID=order_id,
            Step=step,
            IdempotencyKey=key,
            Payload={"OrderID": order_id},
            CompleteBy=datetime.now(UTC) + timedelta(seconds=seconds),
            MaxAttempts=attempts,
        )
        self.bus.send(REQUESTS, request.model_dump_json(), message_id=request.RequestID)
        return request

    def process(self) -> int:
        return self.loop.run_until_complete(self.agent.poll_once(10))

    def replies(self) -> list[dict[str, Any]]:
        return [json.loads(m.body) for m in self.bus.peek(REPLIES)]

    def ledger(self, key: str) -> dict[str, Any]:
        history: dict[str, Any] = self.app[SIMULATOR].ledger.history(key)
        return history

    def close(self) -> None:
        self.loop.run_until_complete(self.agent.remote.close())
        self.loop.run_until_complete(self.runner.cleanup())
        self.bus.close()


@pytest.fixture
def rig(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> Iterator[Rig]:
    made = Rig(loop, tmp_path)
    yield made
    made.close()


def test_transient_failures_are_retried_and_succeed_with_one_effect(rig: Rig) -> None:
    rig.profile(transient_rate=0.6, seed=4)
    rig.request("o-1:ReserveInventory", attempts=10)
    rig.process()
    [reply] = rig.replies()
    ledger = rig.ledger("o-1:ReserveInventory")
    assert reply["Outcome"] == "ok" and reply["Result"]["ReservationId"].startswith("res-")
    assert len(ledger["calls"]) > 1 and len(ledger["effects"]) == 1
    assert reply["Attempts"] == len(ledger["calls"])


def test_no_call_starts_after_complete_by(rig: Rig) -> None:
    rig.profile(transient_rate=1)
    request = rig.request("o-1:ReserveInventory", attempts=100, seconds=0.5)
    rig.process()
    [reply] = rig.replies()
    calls = rig.ledger("o-1:ReserveInventory")["calls"]
    assert reply["Outcome"] == "transient-exhausted"
    assert 1 <= len(calls) == reply["Attempts"] < request.MaxAttempts  # the deadline stopped it
    assert all(datetime.fromisoformat(c["at"].replace("Z", "+00:00")) < request.CompleteBy for c in calls)


def test_max_attempts_is_honoured(rig: Rig) -> None:
    rig.profile(transient_rate=1)
    rig.request("o-1:ChargePayment", step="ChargePayment", attempts=3)
    rig.process()
    [reply] = rig.replies()
    assert reply["Outcome"] == "transient-exhausted" and reply["Attempts"] == 3
    assert len(rig.ledger("o-1:ChargePayment")["calls"]) == 3


def test_a_permanent_error_is_replied_at_once(rig: Rig) -> None:
    rig.profile(permanent_rate=1)
    rig.request("o-1:ChargePayment", step="ChargePayment", attempts=5)
    rig.process()
    [reply] = rig.replies()
    assert reply["Outcome"] == "permanent" and "422" in reply["Error"]
    assert len(rig.ledger("o-1:ChargePayment")["calls"]) == 1


def test_a_request_past_its_complete_by_makes_no_call_and_no_reply(rig: Rig) -> None:
    rig.request("o-1:ReserveInventory", seconds=-1)
    assert rig.process() == 1
    assert rig.replies() == [] and rig.ledger("o-1:ReserveInventory")["calls"] == []
    assert rig.bus.counts(REQUESTS)["active"] == 0 and rig.agent.stats.expired == 1


def test_a_request_that_is_not_utf8_is_dead_lettered_saying_so(rig: Rig) -> None:
    """The agent receives bytes itself (no host between): it dead-letters them with the reason."""
    rig.bus.send(REQUESTS, b'{"RequestID": "o-1:Reserve\xe9"}', message_id="latin-1")
    rig.process()
    [dead] = rig.bus.peek(f"{REQUESTS}/$deadletterqueue")
    assert dead.dead_letter_reason == "InvalidEncoding"
    assert (dead.dead_letter_error_description or "").startswith("the body is not UTF-8 JSON: byte 0xe9")
    assert rig.replies() == [] and rig.agent.stats.dead_lettered == 1


def test_a_malformed_request_is_dead_lettered_with_a_reason(rig: Rig) -> None:
    rig.bus.send(REQUESTS, '{"RequestID": "x"}', message_id="bad")
    rig.process()
    [dead] = rig.bus.peek(f"{REQUESTS}/$deadletterqueue")
    assert dead.dead_letter_reason == "InvalidSchema" and "AgentRequest" in (
        dead.dead_letter_error_description or ""
    )
    assert rig.replies() == []


def test_the_breaker_opens_under_an_outage_fails_fast_and_closes_after_recovery(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    rig = Rig(loop, tmp_path, AGENT_BREAKER_FAILURES=3, AGENT_BREAKER_RECOVERY_SECONDS=0.3)
    try:
        rig.profile(outage=True)
        rig.request("o-1:ReserveInventory", attempts=50, seconds=3.0)
        rig.process()
        calls = rig.ledger("o-1:ReserveInventory")["calls"]
        [reply] = rig.replies()
        # Three failures open it; then attempts fail fast, but for one probe per recovery period.
        assert rig.agent.stats.breaker_rejections >= 1
        assert len(calls) < reply["Attempts"]
        times = [datetime.fromisoformat(c["at"].replace("Z", "+00:00")) for c in calls]
        assert all(later - earlier >= timedelta(seconds=0.3) for earlier, later in pairwise(times[2:]))
        rig.profile()  # the service is back
        deadline = datetime.now(UTC) + timedelta(seconds=0.4)
        wait_for(lambda: datetime.now(UTC) >= deadline, "the breaker's recovery time", timeout=5)
        rig.request("o-2:ReserveInventory", attempts=1)
        rig.process()
        assert [r["Outcome"] for r in rig.replies()][-1] == "ok"
        assert len(rig.ledger("o-2:ReserveInventory")["effects"]) == 1
    finally:
        rig.close()


def test_the_lock_is_renewed_while_a_slow_call_runs(loop: asyncio.AbstractEventLoop, tmp_path: Path) -> None:
    rig = Rig(loop, tmp_path)
    try:
        rig.bus.declare(QueueConfig(REQUESTS, max_delivery_count=2, lock_duration=timedelta(seconds=1)))
        rig.profile(latency_ms=(3000, 3000))
        rig.request("o-1:ReserveInventory", attempts=1)
        second = Agent(rig.settings, LocalAgentMessaging(rig.bus, REQUESTS, REPLIES), rig.agent.remote)

        async def both() -> tuple[int, int]:
            first = asyncio.create_task(rig.agent.poll_once(1))
            while rig.bus.counts(REQUESTS)["locked"] == 0:  # the first agent holds it now
                await asyncio.sleep(POLL)
            # Let twice the lock duration pass, mid-call; then a competing receiver tries.
            expired = datetime.now(UTC) + timedelta(seconds=2)
            while datetime.now(UTC) < expired:
                await asyncio.sleep(POLL)
            stolen = await second.poll_once(1)
            return await first, stolen

        handled, stolen = loop.run_until_complete(both())
        assert (handled, stolen) == (1, 0)  # the renewed lock kept the request hidden
        assert len(rig.ledger("o-1:ReserveInventory")["calls"]) == 1
    finally:
        rig.close()


@pytest.mark.processes  # agent workers and the simulator
@pytest.mark.slow
def test_an_agent_killed_after_the_effect_replies_on_redelivery_with_one_effect(tmp_path: Path) -> None:
    """C10: the effect happened, the agent died before replying; the next agent re-runs the
    request, the service recognises the idempotency key, and the ledger shows one effect."""
    stack = Stack(tmp_path, agents=0, profile={"hang_rate": 1, "hang_seconds": 1.5})
    stack.start_simulator()
    bus = stack.bus()
    bus.declare(QueueConfig(REQUESTS, max_delivery_count=2, lock_duration=timedelta(seconds=1)))
    bus.declare(QueueConfig(REPLIES))
    request = AgentRequest(
        RequestID="o-1-1:ChargePayment",
        InstanceID="o-1-1",
        OrderID="o-1",
        Step="ChargePayment",
        IdempotencyKey="o-1:ChargePayment",
        CompleteBy=datetime.now(UTC) + timedelta(seconds=60),
        MaxAttempts=3,
    )
    bus.send(REQUESTS, request.model_dump_json(), message_id=request.RequestID)
    stack.env |= {"AGENT_CALL_TIMEOUT_SECONDS": "5"}
    try:
        stack.start_agent("first")
        wait_for(lambda: bool(stack.ledger("o-1")), "the first call")
        stack.kill("first")  # mid-call: the service applies the effect, nobody hears back
        stack.set_profile({"hang_rate": 0})
        wait_for(lambda: stack.ledger("o-1")["o-1:ChargePayment"]["effects"] == 1, "the effect")
        assert bus.peek(REPLIES) == []
        stack.start_agent("second")
        wait_for(lambda: bool(bus.peek(REPLIES)), "the reply from the second agent")
        [reply] = [json.loads(m.body) for m in bus.peek(REPLIES)]
        assert reply["Outcome"] == "ok" and reply["RequestID"] == request.RequestID
        status, entry = http_json(f"{stack.simulator_url}/ledger/o-1:ChargePayment")
        assert status == 200 and len(entry["effects"]) == 1
        assert [c["outcome"] for c in entry["calls"]][-1] == "replayed"
    finally:
        assert stack.stop().get("second") == 0  # SIGTERM: a clean stop
        bus.close()


class _FlakyRenewal(LocalAgentMessaging):
    """The local bus, with a broker error on the first lock renewal."""

    failed = False

    async def renew_lock(self, message: Any) -> datetime:
        if not self.failed:
            self.failed = True
            raise RuntimeError("connection reset while renewing")
        return await super().renew_lock(message)


def test_a_failing_renewal_neither_loses_the_finished_call_nor_stops_renewing(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    rig = Rig(loop, tmp_path, AGENT_CALL_TIMEOUT_SECONDS=8)
    try:
        # A 3 s lock and a 4 s call: the first renewal (at 1 s) fails, the next one must hold it.
        rig.bus.declare(QueueConfig(REQUESTS, max_delivery_count=2, lock_duration=timedelta(seconds=3)))
        rig.profile(latency_ms=(4000, 4000))
        flaky = _FlakyRenewal(rig.bus, REQUESTS, REPLIES)
        rig.agent.messaging = flaky
        rig.request("o-1:ReserveInventory", attempts=1)
        assert rig.process() == 1
        assert flaky.failed
        [reply] = rig.replies()  # the call's outcome was replied, not thrown away
        assert reply["Outcome"] == "ok"
        assert rig.bus.counts(REQUESTS)["active"] + rig.bus.counts(REQUESTS)["locked"] == 0  # completed
        assert len(rig.ledger("o-1:ReserveInventory")["calls"]) == 1
    finally:
        rig.close()
