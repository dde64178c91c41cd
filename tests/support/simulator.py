"""The simulator (the remote service the agent calls) served in the test's own process."""

import asyncio
from pathlib import Path

from aiohttp import web

from simulator.app import create_app
from simulator.profile import FaultProfile


def start_simulator(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> tuple[web.Application, web.AppRunner, int]:
    """The simulator in this process, on a free loopback port; stop it with ``runner.cleanup()``."""
    app = create_app(tmp_path / "ledger.db", FaultProfile())
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port: int = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return app, runner, port
