"""The last state record this process read or wrote, per order, with its ETag.

A fenced write starts from this copy instead of a point read (E5 stays intact: the write is
conditional on the copy's ETag, so a copy that another writer has made stale fails with 412 and
the write re-reads). On the happy path one attempt is the only writer of its record, so each of
its activities after the first reads nothing. In Azure the activities of one attempt may run on
other instances: those miss the cache and read, as before.
"""

import threading
from collections import OrderedDict

from domain.ports import Stored

DEFAULT_CAPACITY = 10_000


class RecordCache:
    """A bounded, thread-safe LRU of ``Stored`` records by OrderID."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._records: OrderedDict[str, Stored] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, stored: Stored) -> None:
        with self._lock:
            self._records[stored.record.OrderID] = stored
            self._records.move_to_end(stored.record.OrderID)
            while len(self._records) > self._capacity:
                self._records.popitem(last=False)

    def recall(self, order_id: str) -> Stored | None:
        with self._lock:
            return self._records.get(order_id)

    def forget(self, order_id: str) -> None:
        with self._lock:
            self._records.pop(order_id, None)
