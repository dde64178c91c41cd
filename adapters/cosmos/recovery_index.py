"""The Azure recovery index (E14): Cosmos DB container ``recoveryIndex``, partition key ``/Bucket``.

An entry's id is ``<OrderID>|<CompleteBy>``, so writing it again is the same upsert; its
partition is its CompleteBy bucket, so the Supervisor's read of one bucket is a single-partition
query. The cursor is one small document in a partition of its own. Every request's
``x-ms-request-charge`` is reported as its cost, as in the state store.

The open-source emulator ignores partition-key scoping (docs/local-stack.md): every query names the
bucket in its WHERE clause, so the same text is right on both.
"""

from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime, timedelta
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import (
    CosmosAccessConditionFailedError,
    CosmosResourceExistsError,
    CosmosResourceNotFoundError,
)

from adapters.cosmos.queries import DUE as _DUE
from adapters.cosmos.queries import FIRST_BUCKET as _FIRST_BUCKET
from adapters.cosmos.state_store import first_page
from domain.recovery_index import IndexEntry, IndexPage, check_bucket_size, recovery_bucket
from domain.timestamps import format_ts, parse_ts

PARTITION_KEY_PATH = "/Bucket"
CONTAINER = "recoveryIndex"
# The cursor's own partition: no bucket is named like this, so no scan of a bucket reads it.
_CURSOR_PARTITION = "cursor"
_CURSOR_ID = "cursor"
_CURSOR_ATTEMPTS = 5


class _Charges:
    """Collects ``x-ms-request-charge`` per call, so concurrent callers never read each other's."""

    def __init__(self) -> None:
        self.total = 0.0

    def __call__(self, headers: Mapping[str, str], _body: object) -> None:
        self.total += float(headers.get("x-ms-request-charge", 0))


def entry_id(order_id: str, complete_by: datetime) -> str:
    return f"{order_id}|{format_ts(complete_by)}"


class CosmosRecoveryIndex:
    def __init__(self, container: ContainerProxy, bucket_size: timedelta, *, emulator: bool = False) -> None:
        if bucket_size <= timedelta(0):
            raise ValueError("the bucket size must be positive")
        self._container = container
        self._bucket_size = bucket_size
        # As in the state store: the emulator needs this header to answer a missing id with 404.
        self._read_headers = {"x-ms-documentdb-query-enablecrosspartition": "true"} if emulator else {}

    @property
    def bucket_size(self) -> timedelta:
        return self._bucket_size

    def add(self, order_id: str, complete_by: datetime) -> IndexEntry:
        entry = IndexEntry(order_id, complete_by, recovery_bucket(complete_by, self._bucket_size))
        # An upsert is right here, unlike for state records: an entry is a hint whose content
        # follows from its id, so a repeat or a race writes the same thing.
        self._container.upsert_item(
            {
                "id": entry_id(order_id, complete_by),
                "Bucket": format_ts(entry.Bucket),
                "OrderID": order_id,
                "CompleteBy": format_ts(complete_by),
            }
        )
        return entry

    def due(self, bucket: datetime, now: datetime, limit: int, continuation: str | None = None) -> IndexPage:
        charges = _Charges()
        key = format_ts(bucket)
        pages = self._container.query_items(
            _DUE,
            parameters=[{"name": "@bucket", "value": key}, {"name": "@now", "value": format_ts(now)}],
            partition_key=key,
            max_item_count=limit,
            response_hook=charges,
        ).by_page(continuation)
        items, token = first_page(pages, continuation)
        entries = [IndexEntry(str(i["OrderID"]), parse_ts(str(i["CompleteBy"])), bucket) for i in items]
        return IndexPage(entries=entries, continuation=token, cost=charges.total)

    def first_bucket(self, start: datetime, end: datetime) -> tuple[datetime | None, float]:
        charges = _Charges()
        # Across partitions, but over the index only: its size is the work in flight, never the
        # healthy records. TOP 1 on the partition key reads one entry per physical partition.
        items = list(
            self._container.query_items(
                _FIRST_BUCKET,
                parameters=[
                    {"name": "@start", "value": format_ts(start)},
                    {"name": "@end", "value": format_ts(end)},
                ],
                enable_cross_partition_query=True,
                max_item_count=1,
                response_hook=charges,
            )
        )
        return (parse_ts(str(items[0]["Bucket"])) if items else None), charges.total

    def remove(self, entry: IndexEntry) -> float:
        charges = _Charges()
        # Missing: a racing Supervisor removed it first, which is the same outcome.
        with suppress(CosmosResourceNotFoundError):
            self._container.delete_item(
                entry_id(entry.OrderID, entry.CompleteBy),
                partition_key=format_ts(entry.Bucket),
                response_hook=charges,
            )
        return charges.total

    def _read_cursor(self, charges: _Charges) -> dict[str, Any] | None:
        try:
            item: dict[str, Any] = self._container.read_item(
                _CURSOR_ID, partition_key=_CURSOR_PARTITION, headers=self._read_headers, response_hook=charges
            )
        except CosmosResourceNotFoundError:
            return None
        return item

    def cursor(self) -> datetime | None:
        item = self._read_cursor(_Charges())
        if item is None:
            return None
        check_bucket_size(float(item["BucketSeconds"]), self._bucket_size)
        return parse_ts(str(item["Next"]))

    def advance_cursor(self, bucket: datetime) -> float:
        charges = _Charges()
        target = format_ts(bucket)
        document = {
            "id": _CURSOR_ID,
            "Bucket": _CURSOR_PARTITION,
            "Next": target,
            "BucketSeconds": self._bucket_size.total_seconds(),
        }
        # Forward only, by ETag: a Supervisor that read an older cursor cannot move it back.
        for _ in range(_CURSOR_ATTEMPTS):
            current = self._read_cursor(charges)
            try:
                if current is None:
                    self._container.create_item(document, response_hook=charges)
                elif str(current["Next"]) < target:
                    self._container.replace_item(
                        _CURSOR_ID,
                        document,
                        etag=current["_etag"],
                        match_condition=MatchConditions.IfNotModified,
                        response_hook=charges,
                    )
                return charges.total
            except (CosmosResourceExistsError, CosmosAccessConditionFailedError):
                continue  # another Supervisor moved it first: look again
        # Still contended: leaving the cursor behind only costs the next scan a few more reads.
        return charges.total
