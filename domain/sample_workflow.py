"""The sample workflow: the demo's order steps and business rules, by version (C7).

Which steps an order goes through, which run in the Function App and which at the remote
service through the Agent, how each is undone, and what the local ones check and set. The step
engine that runs any such workflow is generic (``domain.workflow``, ``activities.steps``); this
module is the only place that knows about orders' SKUs and statuses. A new version is a new
entry in ``WORKFLOWS``; in-flight orders keep the version stored in their record.
"""

from collections.abc import Mapping
from typing import Any

from domain.workflow import LocalAction, Runs, Step, Workflow


def _skus(order: Mapping[str, Any], prefix: str) -> list[str]:
    return [str(line["Sku"]) for line in order.get("Lines", []) if str(line["Sku"]).startswith(prefix)]


# The demo's business rules. BLOCKED-* fails the first step (nothing to undo); BACKORDER-* fails
# the last one, after inventory and payment: both are undone, newest first.
def validation_problem(order: Mapping[str, Any]) -> str | None:
    blocked = _skus(order, "BLOCKED")
    return f"SKU(s) {', '.join(blocked)} may not be sold" if blocked else None


def confirmation_problem(order: Mapping[str, Any]) -> str | None:
    backordered = _skus(order, "BACKORDER")
    return f"SKU(s) {', '.join(backordered)} cannot be shipped" if backordered else None


VALIDATE_ORDER = LocalAction("ValidateOrder", problem=validation_problem)
CONFIRM_ORDER = LocalAction("ConfirmOrder", problem=confirmation_problem, status="Confirmed")
SHIP_ORDER = LocalAction("ShipOrder", status="Shipped")

ORDER_WORKFLOW_V1 = Workflow(
    version="v1",
    steps=(
        Step(VALIDATE_ORDER.name, Runs.LOCAL),
        Step("ReserveInventory", Runs.AGENT, compensation="ReleaseInventory"),
        Step("ChargePayment", Runs.AGENT, compensation="RefundPayment"),
        Step(CONFIRM_ORDER.name, Runs.LOCAL),
    ),
    local_actions=(VALIDATE_ORDER, CONFIRM_ORDER),
)

# v2 ships the order after confirming it. Orders started under v1 finish under v1 (C7).
ORDER_WORKFLOW_V2 = Workflow(
    version="v2",
    steps=(*ORDER_WORKFLOW_V1.steps, Step(SHIP_ORDER.name, Runs.LOCAL)),
    local_actions=(*ORDER_WORKFLOW_V1.local_actions, SHIP_ORDER),
)

WORKFLOWS: dict[str, Workflow] = {w.version: w for w in (ORDER_WORKFLOW_V1, ORDER_WORKFLOW_V2)}
