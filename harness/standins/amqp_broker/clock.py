"""The broker's clock: wall-clock seconds plus an offset that tests move forward.

Every timer in the broker (lock expiry, message TTL, the duplicate-detection window, scheduled
messages) reads this clock, so a test can let a five-second lock or a twenty-second window run out
with ``advance()`` instead of sleeping. Times are ``time.time()`` seconds because lock expiries and
enqueue times travel to clients as wall-clock stamps; after an ``advance`` those stamps are ahead
of the client's own clock by the offset, which is what a client would see of a broker whose clock
runs ahead of its own.
"""

import threading
import time


class Clock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offset = 0.0

    def now(self) -> float:
        with self._lock:
            return time.time() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the broker's time forward; it never goes back."""
        if seconds < 0:
            raise ValueError("the broker's clock only moves forward")
        with self._lock:
            self._offset += seconds

    @property
    def offset(self) -> float:
        with self._lock:
            return self._offset
