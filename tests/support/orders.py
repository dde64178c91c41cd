"""Orders as the tests build them: the model a queued order is, the JSON a submitting app posts,
and the row the orders repository stores."""

import json
from datetime import datetime
from decimal import Decimal

from domain.messages import OrderLine, QueuedOrder
from domain.ports import OrderLineRow, OrderRow
from tests.support.clock import T0


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


def body(**changes: object) -> str:
    """An order as a submitting app posts it."""
    data = json.loads(make_submission().model_dump_json(exclude={"SubmittedBy", "StatusQueue"}))
    data.update(changes)
    return json.dumps(data)


def line(**changes: object) -> str:
    """``body`` with its first line changed."""
    data = json.loads(body())
    data["Lines"][0].update(changes)
    return json.dumps(data)


def order(order_id: str = "o-1", *, order_hash: str = "a" * 64) -> OrderRow:
    """An order as the orders repository stores it."""
    return OrderRow(
        OrderID=order_id,
        Customer="Contoso Ltd",
        Total=Decimal("30.05"),
        StatusQueue="status-app-a",
        OrderHash=order_hash,
        Status="Received",
        Lines=(
            OrderLineRow(Sku="SKU-1", Quantity=1, UnitPrice=Decimal("10.05")),
            OrderLineRow(Sku="SKU-2", Quantity=2, UnitPrice=Decimal("10.00")),
        ),
        CreatedAt=T0,
        UpdatedAt=T0,
    )
