"""Admission control's arithmetic (C3): the drain rate, and the Retry-After it gives on the grid
of the backlog's reads, behind the callers already told to come back."""

from datetime import datetime, timedelta

from domain.admission import (
    MAX_RETRY_AFTER_SECONDS,
    DrainMeter,
    ReadGrid,
    Returns,
    drain_from_slots,
    retry_after_seconds,
)

T0 = datetime.fromisoformat("2026-03-01T09:00:00+00:00")
EVERY_5S = ReadGrid(T0, timedelta(seconds=5))


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


def test_the_slots_filling_is_not_drain() -> None:
    # From idle, 20 admitted in 5 s; the backlog grew to 5 and 5 were claimed into the empty
    # slots, one wave: only the other 10 left as attempts ended, 2 a second.
    meter = DrainMeter()
    meter.observe(T0, backlog=0, admitted=0, in_flight=0)
    meter.observe(T0 + timedelta(seconds=5), backlog=5, admitted=20, in_flight=5)
    assert meter.rate() == 2.0
    without_slots = DrainMeter()  # a sample without the slots: the change is not known
    without_slots.observe(T0, backlog=0, admitted=0, in_flight=None)
    without_slots.observe(T0 + timedelta(seconds=5), backlog=5, admitted=20, in_flight=5)
    assert without_slots.rate() == 3.0


def _retry_after(
    backlog: int,
    rate: float | None,
    *,
    now: datetime = T0,
    returns: Returns | None = None,
    grid: ReadGrid = EVERY_5S,
    threshold: int = 500,
    fallback: int = 5,
) -> int:
    return retry_after_seconds(
        now,
        backlog,
        threshold,
        rate,
        read_at=T0,
        grid=grid,
        returns=returns or Returns(),
        fallback=fallback,
    )


def test_retry_after_is_the_first_read_after_the_excess_has_drained() -> None:
    assert _retry_after(599, rate=10.0) == 10  # 100 over ÷ 10/s: the read at 10 s
    assert _retry_after(579, rate=10.0) == 10  # 80 over: 8 s, and the next read is at 10 s
    assert _retry_after(10_000, rate=1.0) == MAX_RETRY_AFTER_SECONDS


def test_retry_after_is_never_before_the_next_read() -> None:
    # One over at 100/s drains in 10 ms, but until the next read the count cannot change.
    assert _retry_after(500, rate=100.0) == 5
    assert _retry_after(500, rate=100.0, now=T0 + timedelta(seconds=3.5)) == 2  # rounded up: 5.5 s
    # A read further off than the minute is still the earliest answer that can differ.
    assert _retry_after(500, rate=100.0, grid=ReadGrid(T0, timedelta(seconds=120))) == 120
    # No rate yet: the configured one, unless the next read is later.
    assert _retry_after(600, rate=None, fallback=7) == 7
    assert _retry_after(600, rate=None, fallback=2) == 5


def test_callers_told_to_come_back_come_first() -> None:
    returns = Returns()
    for n in range(10):  # ten callers already told to come back at the read at 10 s
        returns.promise(f"o-{n}", T0 + timedelta(seconds=10, milliseconds=n))
    # 100 over at 10/s: room at 10 s for 1, and ten are due back then: the next read after.
    assert _retry_after(599, rate=10.0, returns=returns) == 15


def test_the_backlog_drains_no_lower_than_nothing() -> None:
    # At 100/s the backlog is empty by the next read, but that read has room for 500 only.
    returns = Returns()
    for n in range(500):
        returns.promise(f"o-{n}", T0 + timedelta(seconds=5))
    assert _retry_after(500, rate=100.0, returns=returns) == 10


def test_a_read_grid_is_fixed_by_its_anchor() -> None:
    assert EVERY_5S.cell(T0) == 0 and EVERY_5S.cell(T0 + timedelta(seconds=4.999)) == 0
    assert EVERY_5S.cell(T0 + timedelta(seconds=5)) == 1 and EVERY_5S.cell(T0 - timedelta(seconds=1)) == -1
    assert EVERY_5S.start(3) == T0 + timedelta(seconds=15)


def test_returns_are_kept_by_order_until_taken_or_late() -> None:
    returns = Returns(grace=timedelta(seconds=5))
    returns.promise("a", T0 + timedelta(seconds=5))
    returns.promise("b", T0 + timedelta(seconds=10))
    returns.promise("a", T0 + timedelta(seconds=15))  # told again: one place, the new one
    assert len(returns) == 2 and returns.due("a") == T0 + timedelta(seconds=15)
    assert returns.due_before(T0 + timedelta(seconds=15)) == 1
    returns.release("b")
    assert returns.due("b") is None and len(returns) == 1
    returns.expire(T0 + timedelta(seconds=20))  # due at 15 s, 5 s late is not yet late
    assert returns.due("a") is not None
    returns.expire(T0 + timedelta(seconds=20, milliseconds=1))
    assert returns.due("a") is None and len(returns) == 0


def test_the_slots_drain_is_the_slots_held_over_the_oldest_ones_age() -> None:
    # 50 slots, taken over the last 2 s (at the cap, each when an earlier attempt ended): 25/s.
    acquired = [T0 - timedelta(seconds=2) + timedelta(milliseconds=40 * n) for n in range(50)]
    assert drain_from_slots(acquired, T0) == 25.0
    # 250 over at 25/s: 10 s, and one more for the first caller: the read at 15 s.
    assert _retry_after(750, drain_from_slots(acquired, T0)) == 15


def test_no_slots_or_only_fresh_ones_give_no_drain() -> None:
    assert drain_from_slots([], T0) is None
    assert drain_from_slots([T0 - timedelta(milliseconds=10)] * 50, T0) is None
