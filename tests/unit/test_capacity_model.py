"""The capacity model's arithmetic (harness.bench.capacity_model): Little's law for the in-flight cap,
each service's ceiling, the first bottleneck, the hot slots item, and the cost of a million orders."""

import pytest

from harness.bench.capacity_model import (
    Limit,
    Price,
    cap_where_item_binds,
    ceiling,
    cost_per_million,
    drain,
    first_bottleneck,
    hot_item_ceiling,
    ru_per_order,
    within,
)


def _limit(key: str, per_second: float) -> Limit:
    return Limit(key, key, "ops", per_second, "https://example.invalid", f"raise {key}")


def test_the_cap_drains_at_cap_over_the_attempts_duration() -> None:
    assert drain(50, 1.6) == pytest.approx(31.25)
    with pytest.raises(ValueError):
        drain(50, 0)


def test_a_ceiling_is_the_rate_granted_over_what_an_order_consumes() -> None:
    assert ceiling(_limit("bus", 1_000), 25).orders_per_second == 40
    with pytest.raises(ValueError):
        ceiling(_limit("bus", 1_000), 0)


def test_the_first_bottleneck_is_the_lowest_ceiling() -> None:
    low, high = ceiling(_limit("bus", 1_000), 25), ceiling(_limit("db", 5_000), 50)
    assert first_bottleneck([high, low]) is low


def test_within_is_a_fraction_of_the_prediction() -> None:
    assert within(30.0, 24.0, 0.2) and within(30.0, 36.0, 0.2)
    assert not within(30.0, 23.9, 0.2) and not within(30.0, 36.1, 0.2)


def test_request_units_weigh_each_call_and_ignore_what_is_not_the_store() -> None:
    counts = {"state store.get": 2, "state store.replace": 8, "Service Bus.send": 5}
    assert ru_per_order(counts, {"state store.get": 1, "state store.replace": 10}) == 82


def test_cost_per_million_orders_by_price() -> None:
    prices = [
        Price("db", "RU", 0.25, 1_000_000, "https://example.invalid", "2026-12-02", "not"),
        Price("queue", "tx", 0.04, 10_000, "https://example.invalid", "2026-12-02", "not"),
    ]
    costs = cost_per_million({"RU": 100, "tx": 40}, prices)
    assert costs == pytest.approx({"RU": 25.0, "tx": 160.0, "total": 185.0})


def test_a_hot_item_allows_its_partitions_throughput_over_what_an_order_spends_on_it() -> None:
    assert hot_item_ceiling(10_000, 40) == 250
    with pytest.raises(ValueError):
        hot_item_ceiling(10_000, 0)


def test_the_cap_stops_paying_where_its_drain_meets_the_items_falling_ceiling() -> None:
    # An item whose writes cost 1 RU per slot: 10,000 / cap orders a second; cap / 4 meets it at 200.
    cap, rate = cap_where_item_binds(4.0, lambda cap: hot_item_ceiling(10_000, cap))
    assert (cap, rate) == (200, 50.0)
    assert drain(cap - 1, 4.0) < hot_item_ceiling(10_000, cap - 1)
    with pytest.raises(ValueError):
        cap_where_item_binds(4.0, lambda cap: 1e9, highest=10)
