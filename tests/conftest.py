import asyncio
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import CosmosClient
from xdist.scheduler import LoadScopeScheduling

from adapters.azure_profile import pooled_transport
from adapters.clock import ManualClock
from adapters.local_settings import SETTINGS_FILE_VARIABLE
from domain.policy import SchedulerPolicy
from harness.standins.ports import free_port
from tests.support.broker import BrokerFactory, BrokerProcess, broker_process, require_proton, write_config
from tests.support.clock import T0
from tests.support.doc_blocks import DOC_BLOCK
from tests.support.emulators import (
    AZURITE_KEY,
    EMULATOR_KEY,
    azurite_server,
    cosmos_server,
    postgres_cluster,
)

# pytester: tests/unit/test_tiers.py runs the tier guard on a test file of its own.
pytest_plugins = ["pytester"]

# Hermetic settings: the tests run the app from the repository root, where a developer's own
# local.settings.json (the sample's, pointing at emulators) would fill every setting a test leaves
# unset. Set at import, before any fixture, so devhost, ops, the agent and every child process a
# test starts read no settings file; a test that means to read one names it in this variable.
os.environ[SETTINGS_FILE_VARIABLE] = ""


@pytest.fixture(scope="session")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop per test worker: the Durable SDK keeps a module-level aiohttp session,
    which belongs to the loop that created it (as in a real worker process)."""
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def policy() -> SchedulerPolicy:
    return SchedulerPolicy()


# --- Servers, once per test session (per xdist worker) ----------------------------------------
# The emulators profile's servers (tests/support/emulators.py) and the AMQP test broker
# (tests/support/broker.py). A test that uses one carries its marker (SERVER_FIXTURES below).


@pytest.fixture(scope="session")
def cosmos_endpoint() -> Iterator[str]:
    """A Cosmos DB API server (@vercel/cosmosdb-server) on loopback."""
    with cosmos_server(free_port()) as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def cosmos_client(cosmos_endpoint: str) -> CosmosClient:
    return CosmosClient(
        cosmos_endpoint, credential=EMULATOR_KEY, connection_verify=False, transport=pooled_transport()
    )


@pytest.fixture(scope="session")
def cosmos_connection(cosmos_endpoint: str) -> str:
    """The emulator's connection string, as the app's CosmosDBConnection setting takes it."""
    return f"AccountEndpoint={cosmos_endpoint}/;AccountKey={EMULATOR_KEY};"


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[int]]:
    """Azurite (Blobs, Queues, Tables) on loopback; yields its blob, queue and table ports."""
    with azurite_server(tmp_path_factory.mktemp("azurite")) as ports:
        yield ports


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


@pytest.fixture(scope="session")
def postgres_odbc() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on loopback; yields a pyodbc connection string to its
    ``postgres`` database (``new_postgres_database`` gives each test its own)."""
    with postgres_cluster() as connection_string:
        yield connection_string


@pytest.fixture(scope="session")
def servicebus_broker() -> Iterator[BrokerProcess]:
    """The AMQP test broker as a separate process with the repo's Config.json queues."""
    with broker_process() as broker:
        yield broker


@pytest.fixture
def servicebus_broker_with(tmp_path: Path) -> Iterator[BrokerFactory]:
    """Start an in-process broker whose queues are ``{name: Config.json Properties}``; stopped
    after the test. Also offers ``queue_depth`` and ``dead_letter_depth``."""
    require_proton()
    from harness.standins.amqp_broker import Broker, start_broker  # noqa: PLC0415  # only once proton is known to be there

    started: list[Broker] = []

    def start(queues: Mapping[str, Mapping[str, Any]]) -> Broker:
        broker = start_broker(write_config(tmp_path / f"Config-{len(started)}.json", queues))
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


# --- Test tiers --------------------------------------------------------------------------------
# `make check` runs `-m fast`: the tests that need nothing but this venv. A test that needs more
# says so where it is written, with the markers pyproject.toml lists (`pytestmark` for a module,
# a decorator for one test, `marks=` on a backend's parameter); a test with none of them is `fast`.
HEAVY_MARKERS = ("emulators", "processes", "iac", "slow")

# The fixtures that start a server, and the marker a test that reaches one (in its fixtures, or
# through request.getfixturevalue as the contract suites' backends do) must carry: the guard
# below fails such a test without it, so it cannot slip into the fast tier.
SERVER_FIXTURES = {
    "cosmos_endpoint": "emulators",  # node: @vercel/cosmosdb-server (tests/support/emulators.py)
    "azurite": "emulators",  # node: Azurite (tests/support/emulators.py)
    "postgres_odbc": "emulators",  # initdb + postgres from make system-deps (tests/support/emulators.py)
    "cosmos_proxy": "emulators",  # tests/faults/test_fault_proxy.py calls cosmos_server() itself
    # The broker as a child process; servicebus_broker_with's broker runs in-process and is fast.
    "servicebus_broker": "processes",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(marker) for marker in HEAVY_MARKERS):
            item.add_marker("fast")


@pytest.fixture(autouse=True)
def _server_fixtures_need_their_marker(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test that used a server fixture without that fixture's marker. Checked after the
    test: only then does request.fixturenames list what it fetched by getfixturevalue."""
    yield
    missing = sorted(
        f"{name} needs @pytest.mark.{marker}"
        for name, marker in SERVER_FIXTURES.items()
        if name in request.fixturenames and request.node.get_closest_marker(marker) is None
    )
    if missing:
        pytest.fail(f"{request.node.nodeid} lacks its tier marker: {'; '.join(missing)}")


# --- Docs as tests: how many of the docs' shell blocks ran (tests/docs/conftest.py) ------------
# A plugin, not this conftest's own hooks: pytest calls a conftest's report hooks only for the
# items below it, and the documents' items live at README.md and docs/. Counted from the reports,
# so that under xdist the controller, which runs no test, counts them.


class DocBlocks:
    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not any(name == DOC_BLOCK for name, _ in report.user_properties):
            return
        if report.skipped and hasattr(report, "wasxfail"):
            self.outcomes[report.nodeid] = "xfailed"
        elif report.skipped:
            self.outcomes[report.nodeid] = "skipped"
        elif report.failed:
            self.outcomes[report.nodeid] = "failed"
        elif report.when == "call":
            self.outcomes[report.nodeid] = "xpassed" if hasattr(report, "wasxfail") else "passed"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.outcomes:
            return
        outcomes = list(self.outcomes.values())
        ran = len(outcomes) - outcomes.count("skipped")
        detail = ", ".join(
            f"{outcomes.count(o)} {o}" for o in ("passed", "failed", "xfailed", "xpassed") if o in outcomes
        )
        terminalreporter.write_sep("-", "docs' shell blocks (README.md, docs/*.md)")
        terminalreporter.write_line(
            f"{ran} ran ({detail or 'none'}), {outcomes.count('skipped')} skipped with their reasons"
            " (-rs lists them)"
        )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(DocBlocks(), "doc-blocks")


class DocumentsTogether(LoadScopeScheduling):
    """xdist's load scheduling, each test on its own, but a document's shell blocks together on
    one worker: they run in order against one stack. (`--dist loadgroup` with an `xdist_group`
    marker did not group sybil's items under xdist 3.8 here.)"""

    def _split_scope(self, nodeid: str) -> str:
        document = nodeid.split("::", maxsplit=1)[0]
        return document if document == "README.md" or document.startswith("docs/") else nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    return DocumentsTogether(config, log) if config.getvalue("dist") == "load" else None
