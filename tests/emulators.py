"""Local servers for the emulators profile, started once per test session (per xdist worker):
the Cosmos DB API server and Azurite, both installed by ``make emulators``."""

import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3
from azure.cosmos import CosmosClient

ROOT = Path(__file__).resolve().parents[1]
COSMOS_CLI = ROOT / "emulators" / "node_modules" / "@vercel" / "cosmosdb-server" / "lib" / "cli.js"
# The emulator's well-known key: it guards nothing (loopback, test data only).
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def cosmos_endpoint() -> Iterator[str]:
    """A Cosmos DB API server (@vercel/cosmosdb-server) on loopback, for this test session."""
    if not COSMOS_CLI.exists():
        pytest.fail("the Cosmos emulator is not installed: run `make emulators` (make test does)")
    port = _free_port()
    server = subprocess.Popen(
        ["node", str(COSMOS_CLI), "-p", str(port), "--host", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert server.stdout is not None
    ready = server.stdout.readline()  # "Ready to accept HTTPS connections at ..."
    if "Ready" not in ready:
        server.kill()
        pytest.fail(f"the Cosmos emulator did not start: {ready}")
    threading.Thread(target=server.stdout.read, daemon=True).start()  # keep its pipe drained
    urllib3.disable_warnings()  # its certificate is self-signed, on loopback
    yield f"https://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=10)


AZURITE = ROOT / "emulators" / "node_modules" / "azurite" / "dist" / "src" / "azurite.js"
# Azurite's well-known development account: loopback, test data only.
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    """Azurite (Blobs, Queues, Tables) on loopback; yields its blob, queue and table ports."""
    if not AZURITE.exists():
        pytest.fail("Azurite is not installed: run `make emulators` (make test does)")
    ports = [_free_port() for _ in range(3)]
    workdir = tmp_path_factory.mktemp("azurite")
    server = subprocess.Popen(
        [
            "node",
            str(AZURITE),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--loose",
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(ports[0]),
            "--queueHost",
            "127.0.0.1",
            "--queuePort",
            str(ports[1]),
            "--tableHost",
            "127.0.0.1",
            "--tablePort",
            str(ports[2]),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=workdir,  # anything it writes stays out of the repo
    )
    assert server.stdout is not None
    lines = []
    while not any("Table service is successfully listening" in line for line in lines):
        line = server.stdout.readline()
        if not line:
            server.kill()
            pytest.fail(f"Azurite did not start: {''.join(lines)}")
        lines.append(line)
    threading.Thread(target=server.stdout.read, daemon=True).start()
    yield ports
    server.terminate()
    server.wait(timeout=10)


@pytest.fixture(scope="session")
def cosmos_client(cosmos_endpoint: str) -> CosmosClient:
    return CosmosClient(cosmos_endpoint, credential=EMULATOR_KEY, connection_verify=False)


@pytest.fixture(scope="session")
def cosmos_connection(cosmos_endpoint: str) -> str:
    """The emulator's connection string, as the app's CosmosDBConnection setting takes it."""
    return f"AccountEndpoint={cosmos_endpoint}/;AccountKey={EMULATOR_KEY};"


@pytest.fixture(scope="session")
def azurite_tables(azurite: list[int]) -> str:
    """A Tables connection string for Azurite."""
    return (
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
        f"AccountKey={AZURITE_KEY};TableEndpoint=http://127.0.0.1:{azurite[2]}/devstoreaccount1;"
    )


@pytest.fixture(scope="session")
def azurite_blob_endpoint(azurite: list[int]) -> str:
    return f"http://127.0.0.1:{azurite[0]}/devstoreaccount1"
