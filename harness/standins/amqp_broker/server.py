"""The AMQP side: one proton container, in a background thread, serving the store.

Everything proton is touched on the container's thread only; other threads reach it through an
``EventInjector`` (stop) or read the store, which has its own lock.
"""

import logging
import threading
import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

from proton import Condition, Connection, Delivery, Disposition, Event, Handler, Link, Message, symbol
from proton import Session as ProtonSession
from proton._reactor import Acceptor  # not re-exported by proton.reactor; used only as a type
from proton.reactor import ApplicationEvent, Container, EventInjector

from adapters.servicebus.messages import DEAD_LETTER_SUFFIX
from harness.standins.amqp_broker import codec, frames, limits, management
from harness.standins.amqp_broker.clock import Clock
from harness.standins.amqp_broker.config import QueueSettings, load_queues
from harness.standins.amqp_broker.store import (
    BrokerError,
    Store,
    check_properties,
    check_size,
    not_found,
)

logger = logging.getLogger(__name__)

CREDIT = 100  # given to every link the clients send on; topped up as it is used
TICK = 0.05  # how often locks, TTLs and scheduled messages are checked: the timers' precision
_MANAGEMENT = "/$management"
_CBS = "$cbs"
_SESSION_FILTER = "com.microsoft:session-filter"


def entity_of(address: str | None) -> str:
    """``amqps://host:port/Orders/$DeadLetterQueue`` → ``orders/$deadletterqueue``."""
    path = address or ""
    if "://" in path:
        path = path.split("://", 1)[1].partition("/")[2]
    return path.strip("/").lower()


@dataclass
class _Role:
    kind: Literal["consumer", "producer", "management", "cbs", "reply"]
    address: str  # the entity, or the node for request/response links
    receive_and_delete: bool = False


class _BrokerHandler(Handler):
    def __init__(self, store: Store, clock: Clock) -> None:
        super().__init__()
        self.store = store
        self.clock = clock
        self.acceptor: Acceptor | None = None
        self.container: Container | None = None
        self._roles: dict[Link, _Role] = {}
        self._consumers: dict[str, deque[Link]] = {}
        self._replies: dict[tuple[ProtonSession, str], Link] = {}
        self._leases: dict[Delivery, tuple[str, uuid.UUID]] = {}
        self._connections: set[Connection] = set()

    # --- lifecycle -------------------------------------------------------------------------

    def on_reactor_init(self, event: Event) -> None:
        event.container.schedule(TICK, self)

    def on_timer_task(self, event: Event) -> None:
        self._run_timers()
        event.container.schedule(TICK, self)

    def on_broker_sweep(self, event: Event) -> None:
        """``Broker.advance``: the clock moved; run the timers now and say so."""
        self._run_timers()
        done = getattr(event, "subject", None)
        if isinstance(done, threading.Event):
            done.set()

    def _run_timers(self) -> None:
        self.store.sweep(self.clock.now())
        for entity in list(self._consumers):
            self._pump(entity)

    def on_broker_stop(self, event: Event) -> None:
        if self.acceptor is not None:
            self.acceptor.close()
        for connection in list(self._connections):
            connection.close()
        if self.container is not None:
            self.container.stop()

    def on_connection_bound(self, event: Event) -> None:
        # The SDK offers ANONYMOUS for the emulator and then proves itself with a CBS token.
        if event.transport is not None:
            event.transport.sasl().allowed_mechs("ANONYMOUS")
            # Proton's IO handler reads and writes the accepted socket through the selectable's
            # delegate; the shim there gives proton's strict AMQP engine Service Bus's leniencies.
            selectable = getattr(event.transport, "_selectable", None)
            if selectable is not None and not isinstance(selectable._delegate, frames.LenientSocket):
                selectable._delegate = frames.LenientSocket(selectable._delegate)

    def on_connection_remote_open(self, event: Event) -> None:
        connection = _connection(event)
        self._connections.add(connection)
        connection.open()

    def on_session_remote_open(self, event: Event) -> None:
        _session(event).open()

    def on_connection_remote_close(self, event: Event) -> None:
        connection = _connection(event)
        self._forget_connection(connection)
        connection.close()

    def on_transport_closed(self, event: Event) -> None:
        if event.connection is not None:
            self._forget_connection(event.connection)

    def on_session_remote_close(self, event: Event) -> None:
        session = _session(event)
        for link in [link for link in self._roles if link.session == session]:
            self._forget_link(link)
        session.close()

    def on_link_remote_close(self, event: Event) -> None:
        link = _link(event)
        self._forget_link(link)
        link.close()

    def _forget_connection(self, connection: Connection) -> None:
        self._connections.discard(connection)
        for link in [link for link in self._roles if link.connection == connection]:
            self._forget_link(link)

    def _forget_link(self, link: Link) -> None:
        # Locks outlive the link, as in Service Bus: its messages stay locked until they expire
        # or are settled over the management node.
        role = self._roles.pop(link, None)
        if role is None:
            return
        if role.kind == "consumer" and link in self._consumers.get(role.address, ()):
            self._consumers[role.address].remove(link)
        if role.kind == "reply":
            self._replies.pop((link.session, role.address), None)
        for delivery in [d for d in self._leases if d.link == link]:
            del self._leases[delivery]

    # --- attaching -------------------------------------------------------------------------

    def on_link_remote_open(self, event: Event) -> None:
        link = _link(event)
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        try:
            role = self._role_for(link)
        except BrokerError as error:
            link.open()
            link.condition = Condition(error.condition, error.description)
            link.close()
            return
        self._roles[link] = role
        if role.kind == "producer":
            # Service Bus tells a sender its entity's size limit on attach; the SDK sizes batches
            # by it (a batch over it fails client-side with MessageSizeExceededError).
            link.max_message_size = limits.MAX_MESSAGE_SIZE
        link.open()
        if link.is_receiver:
            link.flow(CREDIT)
        elif role.kind == "reply":
            self._replies[(link.session, role.address)] = link
        else:
            self._consumers.setdefault(role.address, deque()).append(link)

    def _role_for(self, link: Link) -> _Role:
        address = (link.remote_source if link.is_sender else link.remote_target).address
        node = entity_of(address)
        if node == _CBS or node.endswith(_MANAGEMENT):
            entity = node.removesuffix(_MANAGEMENT)
            if node != _CBS and not self.store.has(entity):
                raise not_found(address or "")
            if link.is_sender:
                return _Role("reply", node)
            return _Role("cbs" if node == _CBS else "management", node)
        if link.is_receiver:
            # Not checked here: the SDK takes a sender as ready once attached and sends at once, so
            # a refused attach reaches it as an unknown error; a rejected transfer carries ours.
            return _Role("producer", node)
        if not self.store.has(node):
            raise not_found(address or "")
        if _asks_for_a_session(link):
            # No queue here requires sessions (config refuses them), so a session receiver is
            # always refused, as Service Bus refuses one on an entity without sessions.
            raise BrokerError(limits.SESSION_NOT_REQUIRED, limits.SESSION_NOT_REQUIRED_DESCRIPTION)
        return _Role("consumer", node, link.remote_snd_settle_mode == Link.SND_SETTLED)

    # --- transfers -------------------------------------------------------------------------

    def on_link_flow(self, event: Event) -> None:
        role = self._roles.get(_link(event))
        if role is not None and role.kind == "consumer":
            self._pump(role.address)

    def on_delivery(self, event: Event) -> None:
        delivery = event.delivery
        if delivery is None:
            return
        role = self._roles.get(delivery.link)
        if role is None:
            return
        try:
            if delivery.link.is_receiver:
                if delivery.readable and not delivery.partial:
                    self._incoming(delivery, role)
            elif delivery.updated and delivery in self._leases:
                self._settle(delivery, role)
        except Exception:
            # A bug here must not take the reactor thread, and with it every connection, down.
            logger.exception("the broker failed to handle a delivery on %s", role.address)

    def _incoming(self, delivery: Delivery, role: _Role) -> None:
        link = delivery.link
        payload = bytes(link.recv(delivery.pending) or b"")
        link.advance()
        try:
            if role.kind == "producer":
                check_size(payload)
                messages = codec.unpack_batch(payload)
                for message in messages:  # a batch is accepted whole or refused whole
                    check_properties(message)
                for message in messages:
                    self.store.send(role.address, message, self.clock.now())
            else:
                self._request(delivery, role, payload)
            delivery.update(Disposition.ACCEPTED)
        except BrokerError as error:
            _reject(delivery, error)
        except ValueError as error:
            _reject(delivery, BrokerError("amqp:decode-error", str(error)))
        delivery.settle()
        if link.credit < CREDIT // 2:
            link.flow(CREDIT - link.credit)
        if role.kind == "producer":
            self._pump(role.address)

    def _request(self, delivery: Delivery, role: _Role, payload: bytes) -> None:
        request = Message()
        request.decode(payload)
        if role.kind == "cbs":
            reply = management.cbs_reply(request)
        else:
            entity = role.address.removesuffix(_MANAGEMENT)
            reply = management.management_reply(self.store, entity, request, self.clock.now())
        sender = self._replies.get((delivery.link.session, role.address))
        if sender is None:
            raise BrokerError("amqp:precondition-failed", f"no reply link attached from {role.address}")
        # Proton queues a delivery sent before the client grants credit, so there is no wait here.
        reply_delivery = sender.delivery(uuid.uuid4().bytes)  # type: ignore[arg-type]  # bytes tags work
        sender.send(reply.encode())
        sender.advance()
        reply_delivery.settle()

    def _pump(self, entity: str) -> None:
        """Hand out messages to the entity's receivers with credit, one each in turn."""
        consumers = self._consumers.get(entity)
        if not consumers:
            return
        consumers.rotate(1)  # competing receivers share the queue, none always first
        while True:
            ready = [link for link in consumers if link.credit > 0]
            if not ready:
                return
            for link in ready:
                role = self._roles[link]
                lease = self.store.take(entity, self.clock.now(), lock=not role.receive_and_delete)
                if lease is None:
                    for waiting in consumers:
                        if waiting.drain_mode:
                            waiting.drained()
                    return
                token = lease.lock_token or uuid.uuid4()
                # The SDK reads the lock token from the delivery tag, little-endian as .NET writes GUIDs.
                delivery = link.delivery(token.bytes_le)  # type: ignore[arg-type]  # bytes tags work
                link.send(lease.wire)
                link.advance()
                if role.receive_and_delete:
                    delivery.settle()
                else:
                    self._leases[delivery] = (entity, token)

    # --- settling --------------------------------------------------------------------------

    def _settle(self, delivery: Delivery, role: _Role) -> None:
        entity, token = self._leases.pop(delivery)
        outcome = delivery.remote_state
        now = self.clock.now()
        try:
            if outcome == Disposition.ACCEPTED:
                self.store.complete(entity, token, now)
            elif outcome == Disposition.RELEASED:
                self.store.release(entity, token, now)
            elif outcome == Disposition.MODIFIED and delivery.remote.undeliverable:
                raise BrokerError("amqp:not-implemented", "the test broker does not support defer")
            elif outcome == Disposition.MODIFIED:
                self.store.abandon(entity, token, now)
                delivery.local.failed = True
            elif outcome == Disposition.REJECTED:
                reason, description = _dead_letter_reason(delivery)
                self.store.dead_letter(entity, token, reason, description, now)
            else:
                self._leases[delivery] = (entity, token)  # not an outcome yet (e.g. received)
                return
            if not delivery.settled:
                # The SDK settles in mode "second": it waits for the broker to echo the outcome.
                delivery.update(outcome)
        except BrokerError as error:
            _reject(delivery, error)
        delivery.settle()
        self._pump(role.address)


# Proton sets the object an event is about; these say so to the type checker.
def _connection(event: Event) -> Connection:
    assert event.connection is not None
    return event.connection


def _session(event: Event) -> ProtonSession:
    assert event.session is not None
    return event.session


def _link(event: Event) -> Link:
    assert event.link is not None
    return event.link


def _asks_for_a_session(link: Link) -> bool:
    """A session receiver names the session (or none: the next available) in its source's filter."""
    filters = link.remote_source.filter
    filters.rewind()
    if not filters.next():
        return False
    value = filters.get_object()
    return isinstance(value, dict) and symbol(_SESSION_FILTER) in value


def _reject(delivery: Delivery, error: BrokerError) -> None:
    # The SDK reads the error's info field unconditionally, and proton leaves out an empty one.
    delivery.local.condition = Condition(
        error.condition, error.description, {"source": "harness.standins.amqp_broker"}
    )
    delivery.update(Disposition.REJECTED)


def _dead_letter_reason(delivery: Delivery) -> tuple[str, str]:
    condition = delivery.remote.condition
    if condition is None:
        return "", ""
    info = {str(k): v for k, v in condition.info.items()} if isinstance(condition.info, dict) else {}
    reason = info.get("DeadLetterReason")
    description = info.get("DeadLetterErrorDescription", condition.description)
    return str(reason or ""), str(description or "")


class Broker:
    """A running broker. ``stop()`` (or leaving the ``with`` block) shuts it down."""

    def __init__(
        self, queues: list[QueueSettings], host: str = "127.0.0.1", port: int = 0, clock: Clock | None = None
    ) -> None:
        self.host = host
        self.clock = clock or Clock()
        self.store = Store(queues)
        self._handler = _BrokerHandler(self.store, self.clock)
        self._container = Container(self._handler)
        self._handler.container = self._container
        self._injector = EventInjector()
        self._container.selectable(self._injector)
        acceptor = self._container.listen(f"{host}:{port}")
        self._handler.acceptor = acceptor
        # Proton does not report the port it bound; the listening socket does.
        self.port: int = acceptor._selectable.getsockname()[1]
        self._thread = threading.Thread(target=self._container.run, name="amqp-broker", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    @property
    def connection_string(self) -> str:
        # UseDevelopmentEmulator makes the SDK keep the port and talk plain AMQP (no TLS); the
        # key is never checked.
        return (
            f"Endpoint=sb://{self.host}:{self.port};SharedAccessKeyName=RootManageSharedAccessKey;"
            "SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true"
        )

    def advance(self, seconds: float, timeout: float = 5.0) -> None:
        """Move the broker's clock forward and run its timers (lock expiry, TTL, scheduled
        messages) before returning, so a test need not sleep through a lock or a window."""
        self.clock.advance(seconds)
        done = threading.Event()
        self._injector.trigger(ApplicationEvent("broker_sweep", subject=done))
        if not done.wait(timeout):
            raise TimeoutError("the broker did not run its timers")

    def wait_for_renewals(
        self, queue: str, lock_tokens: Iterable[str], beyond: float, timeout: float = 10.0
    ) -> bool:
        """Until every lock of ``lock_tokens`` on ``queue`` was renewed past ``beyond`` seconds
        ahead of the broker's clock; False if that did not happen within ``timeout``."""
        tokens = [uuid.UUID(token) for token in lock_tokens]
        return self.store.wait_for_locks(entity_of(queue), tokens, self.clock.now() + beyond, timeout)

    def queue_depth(self, queue: str) -> int:
        """Messages in the queue, locked and scheduled ones included."""
        return self.store.depth(entity_of(queue))

    def dead_letter_depth(self, queue: str) -> int:
        return self.store.depth(entity_of(queue) + DEAD_LETTER_SUFFIX)

    def stop(self, timeout: float = 5.0) -> None:
        if not self._thread.is_alive():
            return
        self._injector.trigger(ApplicationEvent("broker_stop"))
        self._thread.join(timeout)
        self._injector.close()

    def __enter__(self) -> "Broker":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def start_broker(
    config_path: Path | str, host: str = "127.0.0.1", port: int = 0, clock: Clock | None = None
) -> Broker:
    """A broker for the queues in an emulator ``Config.json``, listening once this returns."""
    return Broker(load_queues(Path(config_path)), host=host, port=port, clock=clock)
