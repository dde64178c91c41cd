"""The recovery index's entries and buckets (E14): where the Supervisor looks for expired locks."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class IndexEntry:
    """One entry of the recovery index (E14): "order OrderID holds a lock until CompleteBy".

    A hint, never the truth: the scan checks every entry against the state record and drops
    it when the record has moved on. ``Bucket`` is CompleteBy truncated to the index's bucket
    size: the partition the Supervisor reads.
    """

    OrderID: str
    CompleteBy: datetime
    Bucket: datetime


@dataclass(frozen=True)
class IndexPage:
    entries: list[IndexEntry]
    continuation: str | None
    cost: float  # as Page.cost: request units on Cosmos, rows examined on SQLite


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def recovery_bucket(moment: datetime, size: timedelta) -> datetime:
    """``moment`` truncated to a multiple of ``size`` since the Unix epoch (UTC).

    Every writer and every Supervisor must use the same ``size``: an entry lives in exactly
    one bucket, and a scan reads only the buckets this function names.
    """
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    if size <= timedelta(0):
        raise ValueError("the bucket size must be positive")
    return _EPOCH + ((moment - _EPOCH) // size) * size


class BucketSizeMismatch(ValueError):
    """The index was built with another bucket size: its entries sit in buckets no scan reads."""


def check_bucket_size(stored_seconds: float, configured: timedelta) -> None:
    if stored_seconds != configured.total_seconds():
        raise BucketSizeMismatch(
            f"the recovery index was built with {stored_seconds / 60:g}-minute buckets, but "
            f"SAS_RECOVERY_BUCKET_MINUTES is {configured.total_seconds() / 60:g}: "
            "change it back, or start a new, empty index"
        )
