"""``make run PROFILE=emulators``: the app on devhost with the emulators profile, in one command.

Starts the Cosmos DB API server (``harness/emulators/cosmos-server.js``) and Azurite (telemetry off) on
free loopback ports; creates what ``infra/`` creates in Azure (the Cosmos DB database and
containers, the compensation log table, ``infra/scripts/init_emulators.py``) and the orders schema
(``ops schema``: SQLite through the SQLite ODBC driver); writes the settings to
``<workdir>/local.settings.json``; starts the simulator and ``--agents`` agents; and runs devhost
in the foreground with those settings (``LOCAL_SETTINGS_FILE``) until Ctrl-C, then stops the rest.
Messaging stays the local bus, as in the emulators profile's tests.

Everything lives in memory or under ``--workdir`` (default ``.data/emulators``), emptied at each
start: the Cosmos DB API server keeps nothing across restarts, so neither does anything else.
Another terminal uses the same stack with ``LOCAL_SETTINGS_FILE=<workdir>/local.settings.json``
(printed at start), e.g. ``python -m ops smoke``.
"""

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import urllib3

from adapters.local_settings import SETTINGS_FILE_VARIABLE
from bootstrap import create_orders_schema
from harness.standins.local_issuer import from_settings
from harness.standins.ports import free_port
from settings import Settings

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "harness" / "emulators" / "node_modules"
COSMOS_SERVER = ROOT / "harness" / "emulators" / "cosmos-server.js"
AZURITE = NODE_MODULES / "azurite" / "dist" / "src" / "azurite.js"
# The emulators' well-known keys: they guard nothing (loopback, local data only).
COSMOS_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
AZURITE_ACCOUNT = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    "AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;"
)


class StartError(Exception):
    pass


def _started(command: list[str], ready: str, what: str, cwd: Path) -> subprocess.Popen[str]:
    """A server as a child process, once it has printed ``ready``; its output drained after."""
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    assert server.stdout is not None
    lines: list[str] = []
    while not any(ready in line for line in lines):
        line = server.stdout.readline()
        if not line:
            server.wait()
            raise StartError(f"{what} did not start: {''.join(lines)[-2000:]}")
        lines.append(line)
    threading.Thread(target=server.stdout.read, daemon=True).start()
    return server


def _init_emulators() -> ModuleType:
    # A script of infra/, not a package: loaded from its file, as `python infra/scripts/...` runs it.
    spec = importlib.util.spec_from_file_location(
        "init_emulators", ROOT / "infra" / "scripts" / "init_emulators.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def emulators(workdir: Path) -> Iterator[dict[str, str]]:
    """The Cosmos DB API server and Azurite, running; yields the settings that reach them."""
    if not COSMOS_SERVER.exists() or not AZURITE.exists():
        raise StartError("the emulators are not installed: run `make emulators`")
    cosmos_port, blob_port, queue_port, table_port = (free_port() for _ in range(4))
    servers: list[subprocess.Popen[str]] = []
    try:
        servers.append(
            _started(
                ["node", str(COSMOS_SERVER), str(cosmos_port), "127.0.0.1"],
                "Ready",
                "the Cosmos DB server",
                workdir,
            )
        )
        azurite = [
            "node",
            str(AZURITE),
            "--inMemoryPersistence",
            "--disableTelemetry",
            "--skipApiVersionCheck",
            "--loose",
            *("--blobHost", "127.0.0.1", "--blobPort", str(blob_port)),
            *("--queueHost", "127.0.0.1", "--queuePort", str(queue_port)),
            *("--tableHost", "127.0.0.1", "--tablePort", str(table_port)),
        ]
        servers.append(_started(azurite, "Table service is successfully listening", "Azurite", workdir))
        yield {
            "CosmosDBConnection": f"AccountEndpoint=https://127.0.0.1:{cosmos_port}/;AccountKey={COSMOS_KEY};",
            "CompensationLogConnection": f"{AZURITE_ACCOUNT}TableEndpoint=http://127.0.0.1:{table_port}/devstoreaccount1;",
            "LeaseStorageConnection": f"{AZURITE_ACCOUNT}BlobEndpoint=http://127.0.0.1:{blob_port}/devstoreaccount1;",
        }
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:  # busy with a client's connection: it holds local data only
                server.kill()
                server.wait()


def settings(workdir: Path, endpoints: dict[str, str], simulator_port: int) -> dict[str, str]:
    values: dict[str, str] = json.loads((ROOT / "local.settings.embedded.json").read_text())["Values"]
    return (
        values
        | endpoints
        | {
            "SAS_PROFILE": "emulators",
            "SAS_COSMOS_DATABASE": "sas",
            "SqlConnection": f"Driver={{SQLite3}};Database={workdir / 'orders-odbc.db'}",
            "SAS_SQL_DIALECT": "sqlite-odbc",
            "SAS_DATA_DIR": str(workdir / "data"),
            "DEVHOST_DATA_DIR": str(workdir / "devhost"),
            "LOCAL_SERVICEBUS_PATH": str(workdir / "servicebus.db"),
            "AGENT_REMOTE_URL": f"http://127.0.0.1:{simulator_port}",
        }
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness.demo.emulators", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--workdir", type=Path, default=ROOT / ".data" / "emulators")
    parser.add_argument(
        "--agents", type=int, default=1, help="agent worker processes (and a simulator if any)"
    )
    parser.add_argument("--port", type=int, default=7071, help="devhost's port (0: any free one)")
    return parser


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    workdir: Path = args.workdir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)  # its own directory: what it holds matches nothing now
    workdir.mkdir(parents=True)
    children: list[subprocess.Popen[bytes]] = []
    try:
        with (
            emulators(workdir) as endpoints,
            from_settings(settings(workdir, endpoints, 0), port=0) as issuer,
        ):
            simulator_port = free_port()
            # The front end's local Entra ID, on loopback: `ops smoke`, `ops token` and curl get
            # their tokens from it, and the front end checks them against its keys.
            values = settings(workdir, endpoints, simulator_port) | issuer.settings()
            urllib3.disable_warnings()  # the Cosmos DB server's certificate is self-signed, on loopback
            init = _init_emulators()
            init.create_cosmos(values)
            init.create_table(values)
            changed = create_orders_schema(Settings.from_env(values))
            print(f"emulators: orders schema: {'; '.join(changed) or 'up to date'}", flush=True)
            settings_file = workdir / "local.settings.json"
            settings_file.write_text(json.dumps({"IsEncrypted": False, "Values": values}, indent=2) + "\n")
            env = {**os.environ, SETTINGS_FILE_VARIABLE: str(settings_file), "PYTHONPATH": str(ROOT)}
            if args.agents:
                log = (workdir / "simulator.log").open("ab")
                simulator = [sys.executable, "-m", "simulator", "--port", str(simulator_port)]
                children.append(subprocess.Popen(simulator, env=env, cwd=ROOT, stdout=log, stderr=log))
            for n in range(args.agents):
                log = (workdir / f"agent-{n}.log").open("ab")
                agent = [sys.executable, "-m", "agent_worker", "--name", f"agent-{n}"]
                children.append(subprocess.Popen(agent, env=env, cwd=ROOT, stdout=log, stderr=log))
            print(
                f"emulators: settings in {settings_file}; in another terminal:\n"
                f"  {SETTINGS_FILE_VARIABLE}={settings_file} .venv/bin/python -m ops smoke",
                flush=True,
            )
            devhost = subprocess.Popen(
                [sys.executable, "-m", "harness.devhost", "start", "--port", str(args.port)],
                env=env,
                cwd=ROOT,
            )
            try:
                return devhost.wait()
            except KeyboardInterrupt:
                # Ctrl-C reaches the whole process group; a SIGTERM reached this process only:
                # either way devhost stops as on its own Ctrl-C, and is waited for (a second
                # Ctrl-C must not cut that short).
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                devhost.send_signal(signal.SIGINT)
                devhost.wait(timeout=60)
                return 0
    except StartError as error:
        print(f"emulators: {error}", file=sys.stderr)
        return 2
    finally:
        for child in children:
            child.terminate()
        for child in children:
            child.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
