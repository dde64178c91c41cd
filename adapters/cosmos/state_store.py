"""The Azure state store: Cosmos DB container ``orderState``, partition key ``/OrderID``.

Every write after creation is ``replace_item`` with the ETag and ``IfNotModified`` — never an
upsert, which would create a missing item. Point reads go by id and partition
key. The two scans are parameterised cross-partition queries paged with ``max_item_count`` and
continuation tokens, and each page's ``x-ms-request-charge`` is reported as its cost (E13).
"""

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from azure.core import MatchConditions
from azure.cosmos import ContainerProxy
from azure.cosmos.exceptions import (
    CosmosAccessConditionFailedError,
    CosmosResourceExistsError,
    CosmosResourceNotFoundError,
)

from adapters.cosmos.queries import CLAIMABLE as _CLAIMABLE
from adapters.cosmos.queries import EXPIRED as _EXPIRED
from adapters.cosmos.queries import IN_STATE as _IN_STATE
from adapters.cosmos.queries import NOTICES as _NOTICES
from adapters.cosmos.queries import count_in_states as _count_in_states
from domain.errors import PreconditionFailed, RecordNotFound
from domain.ports import Created, Page, Stored
from domain.record import StateRecord, from_document, to_document
from domain.states import ProcessState
from domain.timestamps import format_ts

PARTITION_KEY_PATH = "/OrderID"
CONTAINER = "orderState"


def first_page(
    pages: Iterator[Iterable[dict[str, Any]]], sent: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of a ``by_page(sent)`` iteration and the token to resume after it (None at the end)."""
    try:
        items = list(next(pages))
    except StopIteration:
        items = []
    # by_page() returns an ItemPaged page iterator, which has the token; its type says Iterator.
    token: str | None = getattr(pages, "continuation_token", None)
    if not items and token == sent:
        return items, None  # no progress: the server no longer knows that cursor (it is the end)
    return items, token or None


def _stored(item: dict[str, Any]) -> Stored:
    return Stored(from_document(item), str(item["_etag"]))


class CosmosStateStore:
    def __init__(self, container: ContainerProxy, *, emulator: bool = False) -> None:
        self._container = container
        # The open-source emulator answers a point read of a missing id with 500 unless this
        # header is sent; real Cosmos DB needs nothing (docs/local-stack.md).
        self._read_headers = {"x-ms-documentdb-query-enablecrosspartition": "true"} if emulator else {}

    def create_if_absent(self, record: StateRecord) -> Created:
        try:
            item = self._container.create_item(to_document(record))
        except CosmosResourceExistsError:
            existing = self.get(record.OrderID)
            if existing is None:  # deleted in between: no path of this app deletes records
                raise
            return Created(existing, created=False)
        return Created(_stored(item), created=True)

    def get(self, order_id: str) -> Stored | None:
        try:
            item = self._container.read_item(order_id, partition_key=order_id, headers=self._read_headers)
        except CosmosResourceNotFoundError:
            return None
        return _stored(item)

    def replace(self, record: StateRecord, etag: str) -> Stored:
        try:
            item = self._container.replace_item(
                record.OrderID,
                to_document(record),
                etag=etag,
                match_condition=MatchConditions.IfNotModified,
            )
        except CosmosAccessConditionFailedError:
            raise PreconditionFailed(f"state record {record.OrderID} changed since ETag {etag}") from None
        except CosmosResourceNotFoundError:
            raise RecordNotFound(f"no state record for order {record.OrderID}") from None
        return _stored(item)

    def _query(self, query: str, parameters: dict[str, Any], page_size: int) -> list[dict[str, Any]]:
        items = self._container.query_items(
            query,
            parameters=[{"name": k, "value": v} for k, v in parameters.items()],
            enable_cross_partition_query=True,
            max_item_count=page_size,
        )
        return list(items)

    def query_claimable(self, now: datetime, limit: int) -> list[Stored]:
        items = self._query(_CLAIMABLE, {"@limit": limit, "@now": format_ts(now)}, limit)
        return [_stored(item) for item in items[:limit]]

    def query_expired(
        self,
        window_start: datetime,
        now: datetime,
        page_size: int,
        continuation: str | None = None,
    ) -> Page:
        charges: list[float] = []
        pages = self._container.query_items(
            _EXPIRED,
            parameters=[
                {"name": "@windowStart", "value": format_ts(window_start)},
                {"name": "@now", "value": format_ts(now)},
            ],
            enable_cross_partition_query=True,
            max_item_count=page_size,
            # Per request, so concurrent scans never read each other's charge.
            response_hook=lambda headers, _: charges.append(float(headers.get("x-ms-request-charge", 0))),
        ).by_page(continuation)
        items, token = first_page(pages, continuation)
        return Page(items=[_stored(i) for i in items], continuation=token, cost=sum(charges))

    def count_in_states(self, states: frozenset[ProcessState]) -> int:
        if not states:
            return 0
        names = [f"@s{n}" for n in range(len(states))]
        query = _count_in_states(names)
        parameters = dict(zip(names, sorted(s.value for s in states), strict=True))
        return int(sum(self._query(query, parameters, 1000)))  # type: ignore[arg-type]

    def query_pending_notices(self, limit: int) -> list[Stored]:
        items = self._query(_NOTICES, {"@limit": limit}, limit)
        return [_stored(item) for item in items[:limit]]

    def query_in_state(self, state: ProcessState, limit: int) -> list[Stored]:
        items = self._query(_IN_STATE, {"@limit": limit, "@state": state.value}, limit)
        return [_stored(item) for item in items[:limit]]
