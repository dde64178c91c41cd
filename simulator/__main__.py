"""``python -m simulator``: serve the flaky remote service until Ctrl-C or SIGTERM.

python -m simulator [--host 127.0.0.1] [--port 7081] [--ledger .data/simulator.db]
                    [--profile JSON-or-PATH] [--seed N]

With SIMULATOR_AUTH_* set in the environment (its Container App in Azure), only the agent's Entra
token is admitted (simulator/callers.py); unset, as in every local profile, any caller is.
"""

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from aiohttp import web

from simulator.app import create_app
from simulator.callers import CallerCheck, CallerSettingsError, caller_check
from simulator.profile import FaultProfile, load_profile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7081)
    parser.add_argument("--ledger", type=Path, default=Path(".data/simulator.db"))
    parser.add_argument("--profile", default=None, help="fault profile: a JSON object or a JSON file's path")
    parser.add_argument("--seed", type=int, default=None, help="seeds the fault RNG (over the profile's)")
    args = parser.parse_args(argv)
    try:
        profile = load_profile(args.profile) if args.profile else FaultProfile()
        if args.seed is not None:
            profile = profile.merged({"seed": args.seed})
    except (OSError, ValueError) as error:
        print(f"simulator: bad profile: {error}", file=sys.stderr)
        return 2
    try:
        callers = caller_check(os.environ)
    except CallerSettingsError as error:
        print(f"simulator: {error}", file=sys.stderr)
        return 2
    return asyncio.run(_serve(args.host, args.port, args.ledger, profile, callers))


async def _serve(
    host: str, port: int, ledger: Path, profile: FaultProfile, callers: CallerCheck | None
) -> int:
    app = create_app(ledger, profile, callers=callers)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        # Port 0 picks a free port; print the one bound so a caller can find it.
        bound = runner.addresses[0][1] if runner.addresses else port
        print(f"Simulator listening on http://{host}:{bound}", flush=True)
        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stopping.set)
        await stopping.wait()
        print("Simulator stopping", flush=True)
    finally:
        await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
