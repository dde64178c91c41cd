"""Admission control's arithmetic (C3): the drain rate and the Retry-After it gives."""

from datetime import datetime, timedelta

from domain.admission import MAX_RETRY_AFTER_SECONDS, DrainMeter, drain_from_slots, retry_after_seconds

T0 = datetime.fromisoformat("2026-03-01T09:00:00+00:00")


def test_the_drain_rate_counts_what_left_the_backlog() -> None:
    meter = DrainMeter()
    meter.observe(T0, backlog=100, admitted=0)
    assert meter.rate() is None  # one sample is no measurement
    # 20 admitted in 10 s while the backlog fell by 30: 50 left it, 5 a second.
    meter.observe(T0 + timedelta(seconds=10), backlog=70, admitted=20)
    assert meter.rate() == 5.0


def test_a_growing_backlog_has_no_drain_rate() -> None:
    meter = DrainMeter()
    meter.observe(T0, backlog=10, admitted=0)
    meter.observe(T0 + timedelta(seconds=5), backlog=30, admitted=20)
    assert meter.rate() is None


def test_old_samples_leave_the_window() -> None:
    meter = DrainMeter(window=timedelta(seconds=30))
    meter.observe(T0, backlog=1000, admitted=0)
    meter.observe(T0 + timedelta(seconds=40), backlog=600, admitted=0)
    meter.observe(T0 + timedelta(seconds=80), backlog=580, admitted=0)
    assert meter.rate() == 0.5  # the last 40 s only, not the fast first ones


def test_retry_after_is_the_time_the_excess_takes_to_drain() -> None:
    assert retry_after_seconds(599, 500, rate=10.0, fallback=5) == 10
    assert retry_after_seconds(500, 500, rate=100.0, fallback=5) == 1
    assert retry_after_seconds(10_000, 500, rate=1.0, fallback=5) == MAX_RETRY_AFTER_SECONDS
    assert retry_after_seconds(600, 500, rate=None, fallback=7) == 7


def test_the_slots_drain_is_the_slots_held_over_the_oldest_ones_age() -> None:
    # 50 slots, taken over the last 2 s (at the cap, each when an earlier attempt ended): 25/s.
    acquired = [T0 - timedelta(seconds=2) + timedelta(milliseconds=40 * n) for n in range(50)]
    assert drain_from_slots(acquired, T0) == 25.0
    assert retry_after_seconds(750, 500, drain_from_slots(acquired, T0), fallback=5) == 11


def test_no_slots_or_only_fresh_ones_give_no_drain() -> None:
    assert drain_from_slots([], T0) is None
    assert drain_from_slots([T0 - timedelta(milliseconds=10)] * 50, T0) is None
