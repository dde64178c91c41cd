"""How far one deployment goes, and what 1 M orders cost: the model's arithmetic, nothing else.

Pure functions over plain numbers: the per-order counts come from ``harness/bench/results/ops_per_order.json``
(``harness.bench.ops_per_order``), the limits and prices from the services' published pages (each
``Limit`` and ``Price`` names its source). ``harness.bench.capacity`` feeds them in, checks the local
prediction against a measured run and writes ``harness/bench/results/capacity.json``; ``docs/capacity.md``
explains them.

The in-flight cap is a closed loop: at most ``cap`` attempts run at once, each for ``T`` seconds,
so by Little's law the drain is ``cap / T`` orders a second whatever the services allow. Every
other limit is a rate a service grants (units a second) over what one order consumes of it.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Limit:
    """``per_second`` units of ``unit`` a service grants at the deployed SKU; ``setting`` is what
    raises it."""

    key: str  # its name in harness/bench/results/capacity.json
    service: str
    unit: str
    per_second: float
    source: str
    setting: str


@dataclass(frozen=True)
class Ceiling:
    limit: Limit
    per_order: float  # units of the limit's unit one order consumes
    orders_per_second: float


@dataclass(frozen=True)
class Price:
    """``usd`` per ``per`` units of ``unit``, as listed on ``source`` on ``as_of``; ``checked``
    says what of it a stored copy of a published page confirms, and what it does not."""

    service: str
    unit: str
    usd: float
    per: float
    source: str
    as_of: str
    checked: str


def drain(cap: int, attempt_seconds: float) -> float:
    """Little's law for the closed loop of the in-flight cap: orders a second at saturation."""
    if cap < 1 or attempt_seconds <= 0:
        raise ValueError("the cap and the attempt's duration must be positive")
    return cap / attempt_seconds


def ceiling(limit: Limit, per_order: float) -> Ceiling:
    """Orders a second ``limit`` allows when an order consumes ``per_order`` of its unit."""
    if per_order <= 0:
        raise ValueError(f"{limit.service}: an order consumes nothing of {limit.unit}")
    return Ceiling(limit, per_order, limit.per_second / per_order)


def first_bottleneck(ceilings: Sequence[Ceiling]) -> Ceiling:
    """The lowest ceiling: the limit a growing load meets first."""
    if not ceilings:
        raise ValueError("no ceilings")
    return min(ceilings, key=lambda c: c.orders_per_second)


def within(predicted: float, measured: float, tolerance: float) -> bool:
    """Whether ``measured`` is within ``tolerance`` (a fraction) of ``predicted``."""
    return abs(measured - predicted) <= tolerance * predicted


def ru_per_order(counts: Mapping[str, float], ru: Mapping[str, float]) -> float:
    """Request units one order costs: each state-store call's count times its RU estimate."""
    return sum(count * ru[name] for name, count in counts.items() if name in ru)


def cost_per_million(consumed: Mapping[str, float], prices: Sequence[Price]) -> dict[str, float]:
    """USD per million orders, by the unit each price is for (``consumed`` maps it to what one
    order consumes of it), and their ``total``."""
    costs = {p.unit: consumed[p.unit] * 1_000_000 * p.usd / p.per for p in prices if p.unit in consumed}
    return costs | {"total": sum(costs.values())}


def hot_item_ceiling(partition_ru_per_second: float, ru_per_order: float) -> float:
    """Orders a second one logical partition allows when every order spends ``ru_per_order`` on
    the one item in it (the in-flight slots item): more throughput elsewhere does not move it."""
    if ru_per_order <= 0:
        raise ValueError("an order spends nothing on the item")
    return partition_ru_per_second / ru_per_order


def cap_where_item_binds(
    attempt_seconds: float, ceiling_at: Callable[[int], float], highest: int = 1_000_000
) -> tuple[int, float]:
    """The smallest cap at which the cap's own drain, cap / T, reaches the hot item's ceiling
    ``ceiling_at(cap)`` (the item grows with the cap, so the ceiling falls as the cap rises), and
    the rate there: past it, raising the cap buys nothing."""
    for cap in range(1, highest + 1):
        ceiling_here = ceiling_at(cap)
        if drain(cap, attempt_seconds) >= ceiling_here:
            return cap, ceiling_here
    raise ValueError(f"the cap's drain stays below the item's ceiling up to {highest}")
