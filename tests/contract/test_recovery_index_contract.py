"""The RecoveryIndex contract (E14): every adapter passes the same assertions."""

from datetime import timedelta

from domain.ports import RecoveryIndex
from domain.recovery_index import IndexEntry, recovery_bucket
from tests.support.clock import T0

BUCKET = timedelta(minutes=5)


def _all_due(index: RecoveryIndex, bucket_start: timedelta, now_offset: timedelta, limit: int) -> list[str]:
    bucket = T0 + bucket_start
    seen: list[str] = []
    token = None
    while True:
        page = index.due(bucket, T0 + now_offset, limit, token)
        assert page.cost > 0
        assert len(page.entries) <= limit
        seen.extend(e.OrderID for e in page.entries)
        token = page.continuation
        if token is None:
            return seen


def test_bucket_is_complete_by_truncated_to_the_bucket_size() -> None:
    assert recovery_bucket(T0 + timedelta(minutes=7, seconds=59), BUCKET) == T0 + timedelta(minutes=5)
    assert recovery_bucket(T0, BUCKET) == T0
    assert recovery_bucket(T0 - timedelta(microseconds=1), BUCKET) == T0 - BUCKET


def test_add_is_idempotent_and_names_the_bucket(recovery_index: RecoveryIndex) -> None:
    complete_by = T0 + timedelta(minutes=6)
    first = recovery_index.add("o-1", complete_by)
    again = recovery_index.add("o-1", complete_by)
    assert first == again == IndexEntry("o-1", complete_by, T0 + timedelta(minutes=5))
    page = recovery_index.due(first.Bucket, T0 + timedelta(hours=1), 10)
    assert page.entries == [first]


def test_due_reads_one_bucket_only_and_only_what_expired(recovery_index: RecoveryIndex) -> None:
    recovery_index.add("early", T0 + timedelta(minutes=1))
    recovery_index.add("late", T0 + timedelta(minutes=4))
    recovery_index.add("next-bucket", T0 + timedelta(minutes=5))
    recovery_index.add("previous-bucket", T0 - timedelta(seconds=1))
    now = T0 + timedelta(minutes=3)
    page = recovery_index.due(T0, now, 10)
    assert [e.OrderID for e in page.entries] == ["early"]
    assert page.continuation is None and page.cost > 0
    assert [e.OrderID for e in recovery_index.due(T0, T0 + timedelta(hours=1), 10).entries] == [
        "early",
        "late",
    ]
    assert recovery_index.due(T0 + timedelta(hours=1), T0 + timedelta(hours=2), 10).entries == []


def test_one_order_can_have_entries_for_several_complete_bys(recovery_index: RecoveryIndex) -> None:
    recovery_index.add("o-1", T0 + timedelta(seconds=10))
    recovery_index.add("o-1", T0 + timedelta(seconds=20))
    due = recovery_index.due(T0, T0 + timedelta(minutes=1), 10).entries
    assert [(e.OrderID, e.CompleteBy) for e in due] == [
        ("o-1", T0 + timedelta(seconds=10)),
        ("o-1", T0 + timedelta(seconds=20)),
    ]


def test_paging_returns_every_entry_once_in_complete_by_order(recovery_index: RecoveryIndex) -> None:
    for n in range(45):
        recovery_index.add(f"e-{n:02d}", T0 + timedelta(seconds=1 + n // 3))  # ties on purpose
    seen = _all_due(recovery_index, timedelta(0), timedelta(minutes=5), 7)
    assert sorted(seen) == [f"e-{n:02d}" for n in range(45)]
    assert len(seen) == len(set(seen))


def test_paging_survives_removals_between_pages(recovery_index: RecoveryIndex) -> None:
    # The scan removes stale entries while it pages: no entry may be skipped because of that.
    for n in range(30):
        recovery_index.add(f"e-{n:02d}", T0 + timedelta(seconds=1 + n))
    now = T0 + timedelta(minutes=5)
    seen: list[str] = []
    token = None
    while True:
        page = recovery_index.due(T0, now, 4, token)
        seen.extend(e.OrderID for e in page.entries)
        for entry in page.entries:
            assert recovery_index.remove(entry) >= 0
        token = page.continuation
        if token is None:
            break
    assert seen == [f"e-{n:02d}" for n in range(30)]
    assert recovery_index.due(T0, now, 100).entries == []


def test_remove_of_a_missing_entry_is_fine(recovery_index: RecoveryIndex) -> None:
    entry = recovery_index.add("o-1", T0 + timedelta(seconds=5))
    recovery_index.remove(entry)
    recovery_index.remove(entry)
    recovery_index.remove(IndexEntry("ghost", T0, T0))
    assert recovery_index.due(T0, T0 + timedelta(hours=1), 10).entries == []


def test_the_cursor_starts_absent_and_only_moves_forward(recovery_index: RecoveryIndex) -> None:
    assert recovery_index.cursor() is None
    recovery_index.advance_cursor(T0 + timedelta(minutes=10))
    assert recovery_index.cursor() == T0 + timedelta(minutes=10)
    recovery_index.advance_cursor(T0 + timedelta(minutes=5))  # a racing Supervisor, behind
    assert recovery_index.cursor() == T0 + timedelta(minutes=10)
    recovery_index.advance_cursor(T0 + timedelta(minutes=20))
    assert recovery_index.cursor() == T0 + timedelta(minutes=20)
    assert recovery_index.bucket_size == BUCKET


def test_first_bucket_finds_the_oldest_bucket_with_any_entry_in_range(recovery_index: RecoveryIndex) -> None:
    assert recovery_index.first_bucket(T0, T0 + timedelta(days=1))[0] is None
    recovery_index.add("later", T0 + timedelta(hours=2, minutes=1))
    recovery_index.add("earlier", T0 + timedelta(hours=1, minutes=3))
    recovery_index.add("before-range", T0 - timedelta(minutes=1))
    recovery_index.advance_cursor(T0)  # the cursor is no bucket
    found, cost = recovery_index.first_bucket(T0, T0 + timedelta(days=1))
    assert found == T0 + timedelta(hours=1) and cost > 0
    assert recovery_index.first_bucket(T0 + timedelta(hours=1, minutes=5), T0 + timedelta(days=1))[0] == (
        T0 + timedelta(hours=2)
    )
    assert recovery_index.first_bucket(T0 + timedelta(hours=1), T0 + timedelta(hours=1))[0] == (
        T0 + timedelta(hours=1)
    )
    assert recovery_index.first_bucket(T0 + timedelta(hours=3), T0 + timedelta(days=1))[0] is None
