import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from adapters.clock import ManualClock
from domain.messages import OrderLine, QueuedOrder
from domain.policy import SchedulerPolicy

pytest_plugins = ["tests.emulators", "tests.servicebus_broker"]

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
