"""``python -m agent_worker``: run the Agent until SIGTERM or Ctrl-C.

Settings come from the environment, with ``local.settings.json`` ``Values`` filling the gaps
(as for the Function App), so the agent and devhost agree on queues and paths.
"""

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from adapters import telemetry_export
from adapters.local_settings import load_local_settings
from adapters.servicebus.agent_queues import LocalAgentMessaging, ServiceBusAgentMessaging
from adapters.servicebus.clients import async_servicebus_client
from adapters.servicebus.local_bus import LocalServiceBus
from agent_worker.remote import Bearer, RemoteService
from agent_worker.settings import AgentSettings
from agent_worker.worker import Agent
from settings import SettingsError


def _messaging(settings: AgentSettings) -> LocalAgentMessaging | ServiceBusAgentMessaging:
    if settings.uses_local_bus:
        bus = LocalServiceBus(settings.local_servicebus_path)
        return LocalAgentMessaging(bus, settings.requests_queue, settings.replies_queue)
    client = async_servicebus_client(
        settings.servicebus_connection,
        namespace=settings.servicebus_namespace,
        managed_identity_client_id=settings.managed_identity_client_id,
    )
    return ServiceBusAgentMessaging(
        client, settings.requests_queue, settings.replies_queue, idle_wait=settings.idle_wait
    )


def _bearer(settings: AgentSettings) -> Bearer | None:
    """The agent identity's token for the remote service, when it has an audience (Azure)."""
    if settings.remote_audience is None:
        return None
    from azure.identity.aio import DefaultAzureCredential  # noqa: PLC0415 - Azure only

    credential = DefaultAzureCredential(managed_identity_client_id=settings.managed_identity_client_id)
    return Bearer(credential, settings.remote_audience)


async def _run(settings: AgentSettings, name: str) -> int:
    messaging = _messaging(settings)
    remote = RemoteService(settings.remote_url, settings.call_timeout_seconds, _bearer(settings))
    agent = Agent(settings, messaging, remote)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, agent.stop)
    print(
        f"Agent {name} started: {settings.requests_queue} -> {settings.remote_url} -> "
        f"{settings.replies_queue}, concurrency {settings.concurrency}",
        flush=True,
    )
    await agent.run()
    await messaging.close()
    print(f"Agent {name} stopped: {agent.stats}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_worker", description=__doc__.split("\n")[0])
    parser.add_argument("--app-dir", type=Path, default=Path.cwd(), help="where local.settings.json is")
    parser.add_argument("--name", default=str(os.getpid()), help="a name for the logs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"[%(asctime)s] agent {args.name}: %(message)s")
    # The Azure SDKs log every AMQP state change at INFO: that is their debug.
    logging.getLogger("azure").setLevel(logging.WARNING)
    try:
        load_local_settings(args.app_dir.resolve())
        settings = AgentSettings.from_env(os.environ)
    except SettingsError as error:  # the file's or a value's: one line, no traceback
        print(f"agent_worker: {error}", file=sys.stderr)
        return 2
    telemetry_export.configure("agent")
    return asyncio.run(_run(settings, args.name))


if __name__ == "__main__":
    sys.exit(main())
