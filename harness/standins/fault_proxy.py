"""A fault-injecting TCP proxy for tests: it forwards loopback connections to a target, and can
refuse, reset or stall them on demand, from the test's thread.

    with FaultProxy(("127.0.0.1", server_port)) as proxy:
        client.connect(proxy.address)
        proxy.set_mode("stall")  # a black hole until the mode changes
        proxy.set_mode("pass")   # held bytes flow again; new connections work at once

Modes (``set_mode`` returns once the mode is in force):

- ``pass``: bytes are forwarded both ways, half-closes too.
- ``refuse``: the listening socket is closed, so a new connection gets ECONNREFUSED from the
  kernel, as from a host whose server is down. Existing connections are reset. ``pass``,
  ``stall`` or ``reset`` bind the same port again (SO_REUSEADDR).
- ``reset``: existing connections are reset on both sides (SO_LINGER 0, then close: an RST, no
  FIN). New ones are accepted and reset at once, so connect() usually succeeds and the first
  read or write fails with ECONNRESET. A connect() with a timeout may fail with ECONNRESET
  itself: it reads SO_ERROR after the handshake, and the RST may already be there.
- ``stall``: nothing is forwarded in either direction. That covers bytes, an end of stream and a
  peer's reset. New connections are accepted, since the kernel does the handshake, but the
  target is not dialled. What was held flows when the mode goes back to ``pass``, as after a
  healed partition; ``reset`` or ``refuse`` drops it. The proxy's kernel still ACKs, so to a
  client this is a hung server, not a cable cut: TCP keepalives cannot detect it.

``set_mode`` also takes a schedule: a callable returning the mode, evaluated in the proxy's
thread for each new connection and each chunk of bytes, and every ``poll_seconds`` while
something is held. For example, ``lambda: "refuse" if clock.now() < outage_end else "pass"``
makes an outage last a window of a test's virtual time. Under a schedule the listener stays open
(nothing would notice the schedule's end while it is closed). So ``refuse`` resets a new
connection right after accepting it, as ``reset`` does, and an idle connection is reset only
when it next carries bytes.

``stats()`` counts connections and what a stall holds. ``wait_for(predicate, timeout)`` blocks
until the counts satisfy a predicate, e.g. ``stats.held_bytes_to_target > 0`` once a request is
held, so tests synchronise on events rather than on the clock.

How the real clients fail through it (harness/standins/FAULTS.md has every case, the messages, the
versions, and which settings bound a stall):

- PostgreSQL over psqlODBC raises ``pyodbc.OperationalError``:
  - at connect: SQLSTATE 08001, for a refusal ("Connection refused"), a reset ("server closed
    the connection unexpectedly" or "Connection reset by peer") and a stall that outlasts
    ``pyodbc.connect(timeout=N)`` ("timeout expired", after max(N, 2) s);
  - on an open connection: 08S01 ("server closed the connection unexpectedly ... The
    connection has been lost", then "... unable due to the connection lost").
  Nothing in the driver bounds a stall mid-query.
- The Cosmos SDK raises, without a status code:
  - ``ServiceRequestError`` when a connection is refused, after its own retries (2 s with
    the defaults);
  - ``ServiceRequestError`` or ``ServiceResponseError`` when connections are reset;
  - ``ServiceResponseError`` for a write whose connection is reset mid-request (not retried);
  - ``ServiceResponseTimeoutError`` for a stall, after ``connection_timeout`` (handshake) or
    ``read_timeout`` (response; 65 s by default) per attempt, with reads retried
    ``retry_read`` times.
  Its account advertises its own endpoint, so a test must start the server with the proxy's
  port advertised (``tests.support.emulators.cosmos_server(port, advertised_port)``), or the SDK
  bypasses the proxy.
"""

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self, get_args

Mode = Literal["pass", "refuse", "reset", "stall"]
Schedule = Callable[[], Mode]
MODES: tuple[Mode, ...] = get_args(Mode)
CHUNK = 65536
# SO_LINGER on, with a zero timeout: close() discards unsent data and sends an RST.
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)


@dataclass(frozen=True)
class ProxyStats:
    accepted: int  # connections the listener accepted
    forwarded: int  # of those, connections dialled through to the target
    reset: int  # connections the proxy reset because of its mode (at accept or later)
    active: int  # connections open now
    waiting: int  # new connections a stall holds before dialling the target, now
    held: int  # chunks of bytes, ends of stream and resets a stall holds on dialled connections, now
    held_bytes_to_target: int  # the bytes in those chunks that clients sent (a request under way)
    held_bytes_to_client: int  # ... that the target sent (a reply, or a TLS alert before it closes)


class _Reset(Exception):
    """The mode says: reset this connection."""


class _Link:
    """One client connection and, once dialled, its connection to the target."""

    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.upstream: socket.socket | None = None
        self.task: asyncio.Task[None] | None = None

    def arm_reset(self) -> None:
        """The next close of either socket sends an RST."""
        for sock in (self.client, self.upstream):
            if sock is not None and sock.fileno() != -1:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            if sock is not None:
                sock.close()


class FaultProxy:
    """Forwards every TCP connection to ``127.0.0.1:<port>`` on to ``target``; see the module."""

    def __init__(
        self, target: tuple[str, int], *, mode: Mode | Schedule = "pass", poll_seconds: float = 0.01
    ) -> None:
        self.target = target
        self.poll_seconds = poll_seconds
        self._mode: Mode = "pass"
        self._schedule: Schedule | None = None
        self._port = 0
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._links: set[_Link] = set()
        self._changed: asyncio.Event | None = None
        self._counts = dict.fromkeys(
            (
                "accepted",
                "forwarded",
                "reset",
                "waiting",
                "held",
                "held_bytes_to_target",
                "held_bytes_to_client",
            ),
            0,
        )
        self._condition = threading.Condition()
        self.errors: list[BaseException] = []  # unexpected errors in the proxy's thread (tests assert none)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._thread.start()
        try:
            self._call(self._start())
            self.set_mode(mode)
        except BaseException:
            self.close()
            raise

    # The test's side.

    @property
    def port(self) -> int:
        return self._port

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self._port)

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self._port}"

    def url(self, scheme: str = "https") -> str:
        return f"{scheme}://127.0.0.1:{self._port}"

    @property
    def mode(self) -> Mode | Schedule:
        return self._schedule or self._mode

    def set_mode(self, mode: Mode | Schedule) -> None:
        """Puts ``mode`` (or a schedule) in force before returning; safe from any thread but the
        proxy's own (so not from inside a schedule)."""
        if not callable(mode) and mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}: one of {', '.join(MODES)}, or a callable")
        self._call(self._apply(mode))

    def stats(self) -> ProxyStats:
        with self._condition:
            return ProxyStats(active=len(self._links), **self._counts)

    def wait_for(self, predicate: Callable[[ProxyStats], bool], timeout: float = 10) -> ProxyStats:
        """Blocks until ``predicate(stats)`` holds; raises TimeoutError after ``timeout`` seconds."""
        with self._condition:
            if not self._condition.wait_for(lambda: predicate(self.stats()), timeout):
                raise TimeoutError(f"the proxy's counts did not get there in {timeout} s: {self.stats()}")
            return self.stats()

    def close(self) -> None:
        """Stops listening and closes every connection (a FIN, or an RST where the kernel still holds
        bytes the proxy had not read); idempotent."""
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            with contextlib.suppress(TimeoutError, RuntimeError):
                self._call(self._shutdown())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _call(self, work: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=10)

    # The proxy's thread.

    async def _start(self) -> None:
        self._changed = asyncio.Event()
        await self._listen()

    async def _listen(self) -> None:
        if self._listener is not None:
            return
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self._port))  # the same port again after a refusal
            listener.listen(128)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._accepting = asyncio.create_task(self._accept(listener))

    async def _stop_listening(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
            self._accepting = None
        if self._listener is not None:
            self._listener.close()  # connections still in its backlog are reset by the kernel
            self._listener = None

    async def _apply(self, mode: Mode | Schedule) -> None:
        if callable(mode):
            self._schedule, self._mode = mode, "pass"
        else:
            self._schedule, self._mode = None, mode
        if mode == "refuse":
            await self._stop_listening()
        else:
            await self._listen()
        if mode in ("refuse", "reset"):
            await self._reset_all()
        self._wake()

    async def _shutdown(self) -> None:
        await self._stop_listening()
        links = list(self._links)
        for link in links:
            if link.task is not None:
                link.task.cancel()
        await asyncio.gather(*(link.task for link in links if link.task is not None), return_exceptions=True)

    async def _reset_all(self) -> None:
        links = list(self._links)
        for link in links:
            link.arm_reset()
            if link.task is not None:
                link.task.cancel()
        await asyncio.gather(*(link.task for link in links if link.task is not None), return_exceptions=True)
        self._count({"reset": len(links)})

    def _wake(self) -> None:
        """Wakes everything held by a stall to look at the mode again."""
        assert self._changed is not None
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _current(self) -> Mode:
        if self._schedule is None:
            return self._mode
        mode = self._schedule()
        if mode not in MODES:
            raise ValueError(f"the schedule returned {mode!r}: one of {', '.join(MODES)}")
        return mode

    async def _gate(self, counts: dict[str, int]) -> None:
        """Returns when bytes may flow; raises _Reset when the connection is to be reset. While a
        stall holds it, what it holds is added to the stats: ``counts``."""
        held: dict[str, int] = {}
        try:
            while True:
                assert self._changed is not None
                changed = self._changed
                mode = self._current()
                if mode == "pass":
                    return
                if mode != "stall":
                    raise _Reset
                if not held:
                    held = counts
                    self._count(held)
                timeout = None if self._schedule is None else self.poll_seconds
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout)
        finally:
            self._count({name: -count for name, count in held.items()})

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, _ = await loop.sock_accept(listener)
            except OSError as error:  # out of descriptors, say: the test should hear of it
                self.errors.append(error)
                raise
            client.setblocking(False)
            with contextlib.suppress(OSError):  # the client may have reset already
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client)
            with self._condition:
                self._links.add(link)
                self._counts["accepted"] += 1
                self._condition.notify_all()
            link.task = asyncio.create_task(self._serve(link))

    async def _serve(self, link: _Link) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._gate({"waiting": 1})
            link.upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            link.upstream.setblocking(False)
            link.upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(link.upstream, self.target)
            self._count({"forwarded": 1})
            pumps = [
                asyncio.create_task(self._pump(link.client, link.upstream, "held_bytes_to_target")),
                asyncio.create_task(self._pump(link.upstream, link.client, "held_bytes_to_client")),
            ]
            try:
                done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_EXCEPTION)
                for pump in done:
                    pump.result()  # a reset or a peer's error, if any
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except _Reset:
            link.arm_reset()
            self._count({"reset": 1})
        except OSError:
            # The target refused or a peer reset: the other side is reset too, as it would be
            # if the proxy were not there.
            link.arm_reset()
        except Exception as error:  # noqa: BLE001 - a bug, or a schedule that raised: kept for the test
            link.arm_reset()
            self.errors.append(error)
        finally:
            link.close()
            with self._condition:
                self._links.discard(link)
                self._condition.notify_all()

    async def _pump(self, source: socket.socket, sink: socket.socket, held_bytes: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await loop.sock_recv(source, CHUNK)
            except OSError:
                await self._gate({"held": 1})  # a stall holds a peer's reset too...
                raise
            await self._gate({"held": 1, held_bytes: len(data)})  # ... and its end of stream
            if not data:
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)  # pass the half-close on
                return
            await loop.sock_sendall(sink, data)

    def _count(self, deltas: dict[str, int]) -> None:
        with self._condition:
            for name, delta in deltas.items():
                self._counts[name] += delta
            self._condition.notify_all()
