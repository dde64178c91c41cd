"""An idle receive on the local bus takes no write lock: it answers at once while another
process holds the file's write lock, where a locking receive would wait for it."""

import sqlite3
import time
from pathlib import Path

from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import QueueConfig


def test_a_receive_that_finds_nothing_does_not_wait_for_the_write_lock(tmp_path: Path) -> None:
    path = tmp_path / "bus.db"
    with LocalServiceBus(path, [QueueConfig(name="idle"), QueueConfig(name="busy")]) as bus:
        bus.send("busy", b"x", message_id="m-1")
        writer = sqlite3.connect(path, isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")  # another process is in the middle of a write
        try:
            bus._connection().execute("PRAGMA busy_timeout = 500")  # a locking receive fails fast
            started = time.monotonic()
            assert bus.receive("idle", 8) == []
            assert time.monotonic() - started < 0.4
            try:
                bus.receive("busy", 8)
                raise AssertionError("a receive that finds a message must take the write lock")
            except sqlite3.OperationalError as error:
                assert "locked" in str(error)
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        [message] = bus.receive("busy", 8)
        assert message.message_id == "m-1"
