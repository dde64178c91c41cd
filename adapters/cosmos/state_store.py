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
from adapters.cosmos.queries import LOCKED_RECORDS as _LOCKED_RECORDS
from adapters.cosmos.queries import NOTICES as _NOTICES
from adapters.cosmos.queries import count_in_states as _count_in_states
from domain.errors import PreconditionFailed, RecordNotFound
from domain.ports import Created, Page, Slot, SlotOutcome, Stored
from domain.record import StateRecord, from_document, to_document
from domain.states import ProcessState
from domain.timestamps import format_ts, parse_ts

PARTITION_KEY_PATH = "/OrderID"
CONTAINER = "orderState"

# The in-flight cap's slots (C3): one item, in its own logical partition of the state container,
# holding every attempt that holds a slot. Each change is a replace with If-Match on its ETag
# (optimistic concurrency: https://learn.microsoft.com/azure/cosmos-db/nosql/database-transactions-optimistic-concurrency),
# so two claimers that read the same count cannot both write it. It has no ProcessState, so no
# query of records ever returns it.
SLOTS_ID = "sas-in-flight-slots"
# A claimer that loses this many If-Match races in a row gives up: the order stays Pending and the
# starter's next tick sweeps it up (the cap is never exceeded, only a claim deferred).
SLOT_WRITE_ATTEMPTS = 16


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

    def acquire_slot(self, slot: Slot, *, limit: int, release: str | None = None) -> SlotOutcome:
        for _ in range(SLOT_WRITE_ATTEMPTS):
            item, etag = self._read_slots()
            holders: dict[str, dict[str, str]] = item["Holders"]
            before = len(holders)
            if release is not None:
                holders.pop(release, None)
            stale_before = format_ts(slot.stale_before)
            if slot.holder in holders and holders[slot.holder]["AcquiredAt"] < stale_before:
                # This attempt's own slot, left by a claimer that died before its claim write:
                # taken over once stale (StateStore.acquire_slot), or it is never claimed again.
                self._free_stale(holders, stale_before)
            if slot.holder in holders:
                outcome = SlotOutcome.HELD
            else:
                if len(holders) >= limit:
                    self._free_stale(holders, stale_before)
                outcome = SlotOutcome.GRANTED if len(holders) < limit else SlotOutcome.FULL
                if outcome is SlotOutcome.GRANTED:
                    holders[slot.holder] = {"OrderID": slot.order_id, "AcquiredAt": format_ts(slot.at)}
            if etag is not None and len(holders) == before and outcome is not SlotOutcome.GRANTED:
                return outcome  # nothing to write
            if self._write_slots(item, etag):
                return outcome
        return SlotOutcome.FULL

    def release_slot(self, holder: str) -> None:
        for _ in range(SLOT_WRITE_ATTEMPTS):
            item, etag = self._read_slots()
            if item["Holders"].pop(holder, None) is None or self._write_slots(item, etag):
                return

    def slots_acquired(self) -> list[datetime]:
        item, _ = self._read_slots()
        # Slots adopted when the item was created have no time: they say nothing about T.
        return [parse_ts(h["AcquiredAt"]) for h in item["Holders"].values() if h["AcquiredAt"]]

    def _read_slots(self) -> tuple[dict[str, Any], str | None]:
        try:
            item = self._container.read_item(SLOTS_ID, partition_key=SLOTS_ID, headers=self._read_headers)
        except CosmosResourceNotFoundError:
            # The first claim under this cap: attempts already locked (claimed before the cap
            # item existed) hold their slots from the start.
            locked = self._query(_LOCKED_RECORDS, {}, 1000)
            holders = {
                str(i["LockedBy"]): {"OrderID": str(i["OrderID"]), "AcquiredAt": ""}
                for i in locked
                if i.get("LockedBy")
            }
            return {"id": SLOTS_ID, "OrderID": SLOTS_ID, "Holders": holders}, None
        return item, str(item["_etag"])

    def _write_slots(self, item: dict[str, Any], etag: str | None) -> bool:
        """False when another claimer wrote first: read again and retry."""
        body = {"id": SLOTS_ID, "OrderID": SLOTS_ID, "Holders": item["Holders"]}
        try:
            if etag is None:
                self._container.create_item(body)
            else:
                self._container.replace_item(
                    SLOTS_ID, body, etag=etag, match_condition=MatchConditions.IfNotModified
                )
        except (CosmosAccessConditionFailedError, CosmosResourceExistsError):
            return False
        return True

    def _free_stale(self, holders: dict[str, dict[str, str]], stale_before: str) -> None:
        live = {str(i["LockedBy"]) for i in self._query(_LOCKED_RECORDS, {}, 1000) if i.get("LockedBy")}
        for holder in [h for h, v in holders.items() if h not in live and v["AcquiredAt"] < stale_before]:
            del holders[holder]
