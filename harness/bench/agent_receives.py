"""What an idle agent makes Service Bus bill: receive calls per idle minute, against the AMQP
test broker, through the real azure-servicebus SDK.

    .venv/bin/python -m harness.bench.agent_receives [--seconds 60]

Two agents' messaging adapters (``adapters/servicebus/agent_queues.py``) poll an empty
``agent-requests`` queue side by side for the same window: one with the deployed idle wait
(``AGENT_IDLE_RECEIVE_WAIT_SECONDS``, default 15 s, capped by the shutdown grace), the baseline
with the short wait used while a message is held (``RECEIVE_WAIT_SECONDS``, what every receive
used before). Each receive call is an operation Service Bus bills; the bench prints calls per
minute for each, their ratio, and what that comes to per idle replica per 30-day month.
"""

import argparse
import asyncio
import time
from pathlib import Path

from azure.servicebus.aio import ServiceBusClient

from adapters.servicebus.agent_queues import ServiceBusAgentMessaging
from adapters.servicebus.messages import RECEIVE_WAIT_SECONDS
from agent_worker.settings import AgentSettings
from harness.standins.amqp_broker import start_broker

ROOT = Path(__file__).resolve().parents[2]
MONTH_MINUTES = 30 * 24 * 60


async def poll(messaging: ServiceBusAgentMessaging, until: float) -> None:
    while time.monotonic() < until:
        await messaging.receive(1)


async def measure(connection: str, seconds: float, idle_wait: float) -> dict[str, int]:
    async with (
        ServiceBusClient.from_connection_string(connection) as deployed_client,
        ServiceBusClient.from_connection_string(connection) as baseline_client,
    ):
        deployed = ServiceBusAgentMessaging(
            deployed_client, "agent-requests", "agent-replies", idle_wait=idle_wait
        )
        baseline = ServiceBusAgentMessaging(baseline_client, "agent-requests", "agent-replies")
        # Both links open first: a link's attach is not a receive call, and is not counted.
        await asyncio.gather(deployed.receive(1), baseline.receive(1))
        deployed.receive_calls = baseline.receive_calls = 0
        until = time.monotonic() + seconds
        await asyncio.gather(poll(deployed, until), poll(baseline, until))
        return {"deployed": deployed.receive_calls, "baseline": baseline.receive_calls}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    idle_wait = AgentSettings.from_env({}).idle_wait  # the defaults, as deployed
    broker = start_broker(ROOT / "harness" / "emulators" / "servicebus-config" / "Config.json")
    try:
        calls = asyncio.run(measure(broker.connection_string, args.seconds, idle_wait))
    finally:
        broker.stop()
    minutes = args.seconds / 60
    print(f"idle for {args.seconds:.0f} s on an empty agent-requests queue (AMQP test broker):")
    for name, wait in (("deployed", idle_wait), ("baseline", RECEIVE_WAIT_SECONDS)):
        per_minute = calls[name] / minutes
        print(
            f"  {name:9} max_wait_time {wait:5.1f} s: {calls[name]:5d} receive calls,"
            f" {per_minute:7.1f}/min, {per_minute * MONTH_MINUTES / 1e6:6.3f} M per idle replica-month"
        )
    print(
        f"  baseline / deployed: {calls['baseline'] / max(calls['deployed'], 1):.0f}x fewer billed receives"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
