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

# pytester: tests/unit/test_tiers.py runs the tier guard on a test file of its own.
pytest_plugins = ["tests.emulators", "tests.servicebus_broker", "pytester"]

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
# `make check` runs `-m fast`: the tests that need nothing but this venv. A test that needs more
# says so where it is written, with the markers pyproject.toml lists (`pytestmark` for a module,
# a decorator for one test, `marks=` on a backend's parameter); a test with none of them is `fast`.
HEAVY_MARKERS = ("emulators", "processes", "iac", "slow")

# The fixtures that start a server, and the marker a test that reaches one (in its fixtures, or
# through request.getfixturevalue as the contract suites' backends do) must carry: the guard
# below fails such a test without it, so it cannot slip into the fast tier.
SERVER_FIXTURES = {
    "cosmos_endpoint": "emulators",  # node: @vercel/cosmosdb-server (tests/emulators.py)
    "azurite": "emulators",  # node: Azurite (tests/emulators.py)
    "postgres_odbc": "emulators",  # initdb + postgres from make system-deps (tests/emulators.py)
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
