"""Orders as the domain and service tests build them."""

from datetime import datetime
from decimal import Decimal

from domain.messages import OrderLine, QueuedOrder
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
