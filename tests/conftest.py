import asyncio
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from adapters.clock import ManualClock
from adapters.local_settings import SETTINGS_FILE_VARIABLE
from domain.messages import OrderLine, QueuedOrder
from domain.policy import SchedulerPolicy

pytest_plugins = ["tests.emulators", "tests.servicebus_broker"]

# Hermetic settings: the tests run the app from the repository root, where a developer's own
# local.settings.json (the sample's, pointing at emulators) would fill every setting a test leaves
# unset. Set at import, before any fixture, so devhost, ops, the agent and every child process a
# test starts read no settings file; a test that means to read one names it in this variable.
os.environ[SETTINGS_FILE_VARIABLE] = ""

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


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


def make_submission(
    order_id: str = "order-1",
    *,
    quantity: int = 2,
    app: str = "app-a",
    submitted_at: datetime = T0,
) -> QueuedOrder:
    price = Decimal("12.50")
    return QueuedOrder(
        OrderID=order_id,
        Customer="Contoso",
        Lines=[OrderLine(Sku="SKU-1", Quantity=quantity, UnitPrice=price)],
        Total=price * quantity,
        SubmittedBy=app,
        SubmittedAt=submitted_at,
    )


# --- Test tiers --------------------------------------------------------------------------------
# `make check` runs `-m fast`: the tests that need nothing but this venv. Each test gets the
# markers of what it needs (pyproject.toml lists them) and `fast` when it needs none of them, so
# a new test lands in the fast tier unless it uses one of the things below. The rules follow what
# the tests were seen to start (every child process of a full run, recorded per test).

# Fixtures that start a server; a test gets the marker when the fixture is anywhere in its closure
# (cosmos_client, azurite_tables, ... depend on these).
TIER_FIXTURES = {
    "cosmos_endpoint": "emulators",  # node: @vercel/cosmosdb-server (tests/emulators.py)
    "azurite": "emulators",  # node: Azurite (tests/emulators.py)
    "postgres_odbc": "emulators",  # initdb + postgres from make system-deps (tests/emulators.py)
    "cosmos_proxy": "emulators",  # tests/faults/test_fault_proxy.py calls cosmos_server() itself
    # The broker as a child process; servicebus_broker_with's broker runs in-process and is fast.
    "servicebus_broker": "processes",
}
# The contract suites' backend ids: their factories reach the server or driver through
# request.getfixturevalue, which the fixture closure above does not show.
TIER_BACKENDS = {
    "cosmos": "emulators",
    "cosmos+index": "emulators",
    "tables": "emulators",  # Azurite
    "blob": "emulators",  # Azurite
    "pyodbc-postgresql": "emulators",
    "pyodbc-sqlite": "emulators",  # the SQLite3 ODBC driver is a system package (make system-deps)
}
# Tests that start processes or use the iac venvs in their own body: a directory, a module, or
# the named tests of a module (all their parameters).
TIER_PATHS: dict[str, tuple[str, tuple[str, ...]]] = {
    # .venv-bicep / .venv-checkov; tests/iac/test_emulator_config.py calls the checker in-process.
    "tests/iac/test_iac.py": ("iac", ()),
    "tests/e2e/": ("processes", ()),  # devhost start, agent_worker, simulator, demo
    "tests/conformance/": ("processes", ()),  # a fresh venv from pip, the real worker, devhost start
    "tests/broker/test_process.py": ("processes", ()),  # python -m testing.amqp_broker
    "tests/broker/test_limits.py": ("processes", ("test_the_command_refuses_such_a_config_at_start_up",)),
    "tests/devhost/test_kill.py": ("processes", ()),  # devhost start, killed and restarted
    "tests/devhost/test_host_json.py": (
        "processes",
        ("test_a_host_json_the_host_refuses_is_a_start_up_error",),  # python -m devhost start
    ),
    "tests/devhost/test_servicebus.py": (
        "processes",
        ("test_processes_draining_one_queue_receive_every_message_exactly_once",),  # multiprocessing
    ),
    "tests/contract/test_sqlite_state_store.py": (
        "processes",
        ("test_processes_racing_a_replace_on_one_etag_have_exactly_one_winner",),  # multiprocessing
    ),
    "tests/agent/test_agent.py": (
        "processes",
        ("test_an_agent_killed_after_the_effect_replies_on_redelivery_with_one_effect",),
    ),
    "tests/simulator/test_simulator.py": ("processes", ("test_cli_serves_until_sigterm",)),
    "tests/unit/test_telemetry_export.py": (
        "processes",  # a fresh interpreter each, so the telemetry distro configures from scratch
        (
            "test_with_the_pinned_distro_the_agent_installs_its_log_exporter",
            "test_with_the_pinned_distro_the_function_app_installs_no_log_exporter",
        ),
    ),
}
# Not fast either: `slow`, which the large-volume and multi-process tests carry already.
HEAVY_MARKERS = ("emulators", "processes", "iac", "slow")


def _path_tiers(item: pytest.Item) -> set[str]:
    module = item.nodeid.split("::", 1)[0]
    name = getattr(item, "originalname", item.name)  # without its parameters
    return {
        tier
        for path, (tier, names) in TIER_PATHS.items()
        if (module.startswith(path) if path.endswith("/") else module == path)
        and (not names or name in names)
    }


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tiers = {TIER_FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in TIER_FIXTURES}
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        tiers |= {TIER_BACKENDS[p] for p in params if isinstance(p, str) and p in TIER_BACKENDS}
        tiers |= _path_tiers(item)
        for tier in sorted(tiers):
            item.add_marker(tier)
        # Markers set by hand in a test module count too.
        if not any(item.get_closest_marker(marker) for marker in HEAVY_MARKERS):
            item.add_marker("fast")
