"""What this process last read or wrote, per order: state records with their ETag, and orders.

A fenced write starts from the cached record instead of a point read (E5 stays intact: the write
is conditional on the copy's ETag, so a copy that another writer has made stale fails with 412
and the write re-reads). On the happy path one attempt is the only writer of its record, so each
of its activities after the first reads nothing. In Azure the activities of one attempt may run
on other instances: those miss the cache and read, as before. An order's data never changes
after it is written (its hash guards it), so a cached order is never stale where it is used.
"""

import threading
from collections import OrderedDict

from domain.ports import Stored

DEFAULT_CAPACITY = 10_000


class LruCache[V]:
    """A bounded, thread-safe least-recently-used map by OrderID."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, key: str, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def get(self, key: str) -> V | None:
        with self._lock:
            return self._items.get(key)

    def pop(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)


class RecordCache(LruCache[Stored]):
    """State records with their ETags."""

    def remember(self, stored: Stored) -> None:
        self.put(stored.record.OrderID, stored)

    def recall(self, order_id: str) -> Stored | None:
        return self.get(order_id)

    def forget(self, order_id: str) -> None:
        self.pop(order_id)
