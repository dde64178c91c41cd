"""The Agent on Service Bus: ``ServiceBusAgentMessaging`` (azure-servicebus aio) against the AMQP
test broker, with the simulator in-process. What the embedded tests prove on devhost's bus —
reply then complete, dead-letter a bad request, renew the lock through a slow call — here on
the SDK that the deployed agent uses."""

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient

from adapters.servicebus.agent_queues import ServiceBusAgentMessaging
from agent_worker.remote import RemoteService
from agent_worker.settings import AgentSettings
from agent_worker.worker import Agent
from domain.messages import AgentRequest
from simulator.app import SIMULATOR
from simulator.profile import FaultProfile
from tests.support.simulator import start_simulator

REQUESTS, REPLIES = "agent-requests", "agent-replies"


class BrokerRig:
    def __init__(self, loop: asyncio.AbstractEventLoop, tmp_path: Path, broker: Any) -> None:
        self.loop = loop
        self.broker = broker
        self.app, self.runner, port = start_simulator(loop, tmp_path)
        self.settings = AgentSettings.model_validate(
            {
                "AGENT_BACKOFF_INITIAL_SECONDS": 0.02,
                "AGENT_BACKOFF_MAX_SECONDS": 0.1,
                "AGENT_CALL_TIMEOUT_SECONDS": 10,
                "AGENT_REMOTE_URL": f"http://127.0.0.1:{port}",
            }
        )
        self.client = ServiceBusClient.from_connection_string(broker.connection_string)

    def agent(self) -> Agent:
        messaging = ServiceBusAgentMessaging(
            AsyncServiceBusClient.from_connection_string(self.broker.connection_string), REQUESTS, REPLIES
        )
        return Agent(self.settings, messaging, RemoteService(self.settings.remote_url, 10))

    def request(self, order_id: str, *, body: str | None = None) -> AgentRequest:
        request = AgentRequest(
            RequestID=f"{order_id}-1:ReserveInventory",
            InstanceID=f"{order_id}-1",
            OrderID=order_id,
            Step="ReserveInventory",
            IdempotencyKey=f"{order_id}:ReserveInventory",
            Payload={"OrderID": order_id},
            CompleteBy=datetime.now(UTC) + timedelta(seconds=30),
            MaxAttempts=3,
        )
        with self.client.get_queue_sender(REQUESTS) as sender:
            sender.send_messages(
                ServiceBusMessage(body or request.model_dump_json(), message_id=request.RequestID)
            )
        return request

    def run(self, agent: Agent, until: Callable[[], bool]) -> None:
        async def go() -> None:
            for _ in range(200):
                await agent.poll_once(4)
                if until():
                    return
            raise AssertionError("the agent did not get there")

        self.loop.run_until_complete(go())

    def replies(self) -> list[Any]:
        with self.client.get_queue_receiver(REPLIES) as receiver:
            return list(receiver.peek_messages(max_message_count=50))

    def close(self, *agents: Agent) -> None:
        for agent in agents:
            self.loop.run_until_complete(agent.messaging.close())  # type: ignore[attr-defined]
            self.loop.run_until_complete(agent.remote.close())
        self.client.close()
        self.loop.run_until_complete(self.runner.cleanup())


@pytest.fixture
def rig(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, servicebus_broker_with: Callable[..., Any]
) -> Iterator[BrokerRig]:
    broker = servicebus_broker_with(
        {
            REQUESTS: {"MaxDeliveryCount": 2, "LockDuration": "PT5S"},  # the shortest Azure allows
            REPLIES: {"MaxDeliveryCount": 5, "LockDuration": "PT30S"},
        }
    )
    made = BrokerRig(loop, tmp_path, broker)
    yield made


def test_the_agent_replies_on_service_bus_then_completes_the_request(rig: BrokerRig) -> None:
    agent = rig.agent()
    try:
        request = rig.request("o-1")
        rig.run(agent, lambda: rig.broker.queue_depth(REQUESTS) == 0)
        [reply] = rig.replies()
        body = json.loads(b"".join(reply.body))
        assert (reply.message_id, reply.correlation_id) == (f"{request.RequestID}:reply", "o-1")
        assert (body["RequestID"], body["Outcome"]) == (request.RequestID, "ok")
        assert len(rig.app[SIMULATOR].ledger.history("o-1:ReserveInventory")["effects"]) == 1
    finally:
        rig.close(agent)


def test_a_malformed_request_is_dead_lettered_on_service_bus_with_a_reason(rig: BrokerRig) -> None:
    agent = rig.agent()
    try:
        rig.request("o-1", body='{"RequestID": 42}')
        rig.run(agent, lambda: rig.broker.dead_letter_depth(REQUESTS) == 1)
        with rig.client.get_queue_receiver(REQUESTS, sub_queue=ServiceBusSubQueue.DEAD_LETTER) as dlq:
            [dead] = dlq.peek_messages(max_message_count=5)
        assert dead.dead_letter_reason == "InvalidSchema"
        assert rig.replies() == []
    finally:
        rig.close(agent)


def test_the_lock_is_renewed_on_service_bus_while_a_slow_call_runs(rig: BrokerRig) -> None:
    """A 5 s lock (Azure's minimum) and a 7 s call: without renewal the request would be redelivered to the
    second agent, which would call the service again."""
    rig.app[SIMULATOR].profile = FaultProfile.model_validate({"latency_ms": (7000, 7000)})
    first, second = rig.agent(), rig.agent()
    try:
        rig.request("o-1")

        holding = asyncio.Event()
        handle = first.handle

        async def hold(message: Any) -> None:
            holding.set()  # the first agent holds the request now
            await handle(message)

        first.handle = hold  # type: ignore[method-assign]

        async def both() -> tuple[int, int]:
            slow = asyncio.create_task(first.poll_once(1))
            held = asyncio.create_task(holding.wait())
            await asyncio.wait({slow, held}, return_when=asyncio.FIRST_COMPLETED)
            held.cancel()
            stolen = 0
            while not slow.done():
                stolen += await second.poll_once(1)
            return await slow, stolen

        handled, stolen = rig.loop.run_until_complete(both())
        assert (handled, stolen) == (1, 0)
        assert len(rig.app[SIMULATOR].ledger.history("o-1:ReserveInventory")["calls"]) == 1
        assert rig.broker.queue_depth(REQUESTS) == 0
    finally:
        rig.close(first, second)
