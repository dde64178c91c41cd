"""A small pool of open database connections, shared by the worker's threads.

Every call used to log in again: a TLS handshake and an Entra token check against Azure SQL, a
fork of a backend on PostgreSQL. pyodbc's own pooling is unixODBC's, which is off unless the
driver's odbcinst.ini entry says ``Pooling=Yes`` (not ours to edit on Azure's workers), so the
pool is here, explicit. A connection is handed to one thread at a time. One that was in use
when a transient fault struck is closed, not returned, and the idle ones with it: they lead to
the same server, which has just dropped or restarted, and would each fail once more.
"""

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from adapters.resilience import is_transient


class Connection(Protocol):
    def cursor(self) -> Any: ...

    def commit(self) -> object: ...

    def rollback(self) -> object: ...

    def close(self) -> object: ...


class ConnectionPool[C: Connection]:
    def __init__(self, connect: Callable[[], C], max_idle: int = 8) -> None:
        self._connect = connect
        self._max_idle = max_idle
        self._idle: list[C] = []
        self._lock = threading.Lock()
        self.opened = 0  # connections made, for tests and benchmarks

    @contextlib.contextmanager
    def connection(self) -> Iterator[C]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
            self.opened += 1
        try:
            yield conn
        except BaseException as error:
            if isinstance(error, Exception) and is_transient(error):
                _close(conn)
                self.clear()
                raise
            self._give_back(conn)
            raise
        self._give_back(conn)

    def _give_back(self, conn: C) -> None:
        with self._lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        _close(conn)

    def clear(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)


def _close(conn: Connection) -> None:
    with contextlib.suppress(Exception):  # a dead connection may fail to close; it is gone either way
        conn.close()
