"""devhost's Service Bus trigger source on a real broker, through azure-servicebus.

It stands where the Functions host's Service Bus extension stands: it receives in peek-lock,
renews locks while a function runs, completes or abandons when the function returns, and
settles on the app's behalf a message the function dead-letters by lock token (what the
SDK-type binding's ``ServiceBusMessageActions`` does in Azure).

Service Bus settles a message only on the link that received it, and the SDK's sync receiver
is not thread-safe: each receiver has a lock, and each message remembers its receiver.
Receivers are per worker thread, so concurrent receive loops do not queue behind each other.
"""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from azure.servicebus import ServiceBusClient, ServiceBusReceivedMessage, ServiceBusReceiver
from azure.servicebus.amqp import AmqpMessageBodyType
from azure.servicebus.exceptions import MessageAlreadySettled, MessageLockLostError, ServiceBusError

from devhost.servicebus import MessageLockLost, QueueConfig, ReceivedMessage

log = logging.getLogger("devhost.servicebus")

# How long a receive waits for the first message; short, so a settlement queued behind it
# on the same receiver waits little.
RECEIVE_WAIT_SECONDS = 0.2

_in_flight: dict[str, "_Held"] = {}
_in_flight_guard = threading.Lock()


class _Held:
    def __init__(
        self, lock: threading.Lock, receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage
    ):
        self.lock = lock
        self.receiver = receiver
        self.message = message


def dead_letter_in_flight(lock_token: str, reason: str, description: str) -> bool:
    """Dead-letter a message a devhost trigger is processing; False if no trigger holds it."""
    with _in_flight_guard:
        held = _in_flight.get(lock_token)
    if held is None:
        return False
    with held.lock:
        held.receiver.dead_letter_message(held.message, reason=reason, error_description=description)
    with _in_flight_guard:
        _in_flight.pop(lock_token, None)
    return True


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def message_bytes(message: ServiceBusReceivedMessage) -> bytes:
    """The body as bytes, whatever AMQP body the sender used: data sections (what the SDKs
    send), or a single value (a JMS TextMessage, say); anything else reads as empty, so the
    app rejects it with a reason rather than the receive failing."""
    body: Any = message.body
    if message.body_type == AmqpMessageBodyType.DATA:
        return b"".join(bytes(section) for section in body)
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return b""


def received_view(queue: str, message: ServiceBusReceivedMessage) -> ReceivedMessage:
    epoch = datetime.fromtimestamp(0, UTC)
    return ReceivedMessage(
        queue=queue,
        sequence_number=message.sequence_number or 0,
        message_id=str(message.message_id),
        body=message_bytes(message),
        correlation_id=message.correlation_id,
        content_type=message.content_type,
        subject=message.subject,
        reply_to=message.reply_to,
        application_properties={
            _text(k): _text(v) for k, v in (message.application_properties or {}).items()
        },
        # The AMQP header counts earlier attempts (0 first); Functions' DeliveryCount, like the
        # .NET SDK's and devhost's local bus, counts this one too (1 first).
        delivery_count=(message.delivery_count or 0) + 1,
        enqueued_time=message.enqueued_time_utc or epoch,
        scheduled_enqueue_time=message.scheduled_enqueue_time_utc,
        locked_until=message.locked_until_utc or epoch,
        lock_token=str(message.lock_token),
        dead_letter_reason=message.dead_letter_reason,
        dead_letter_error_description=message.dead_letter_error_description,
    )


class BrokerServiceBus:
    """The subset of devhost's ``LocalServiceBus`` the host's trigger loop uses, on a broker."""

    def __init__(self, client: ServiceBusClient, queues: list[QueueConfig]) -> None:
        self.client = client
        self._queues = queues
        self._local = threading.local()
        self._receivers: list[ServiceBusReceiver] = []
        self._guard = threading.Lock()

    def queues(self) -> list[QueueConfig]:
        """As declared in the Service Bus config; the broker is the truth, this sets renewal."""
        return list(self._queues)

    def next_due(self) -> datetime | None:
        return None  # a real broker runs on real time: nothing for a virtual clock to wait for

    def _receiver(self, queue: str) -> tuple[threading.Lock, ServiceBusReceiver]:
        mine: dict[str, tuple[threading.Lock, ServiceBusReceiver]] = self._local.__dict__.setdefault(
            "receivers", {}
        )
        if queue not in mine:
            receiver = self.client.get_queue_receiver(queue, prefetch_count=0)
            # Open the link now: a receive's short max_wait_time would also bound the link's opening.
            receiver.__enter__()
            with self._guard:
                self._receivers.append(receiver)
            mine[queue] = (threading.Lock(), receiver)
        return mine[queue]

    def receive(self, queue: str, max_messages: int) -> list[ReceivedMessage]:
        lock, receiver = self._receiver(queue)
        with lock:
            batch = receiver.receive_messages(
                max_message_count=max_messages, max_wait_time=RECEIVE_WAIT_SECONDS
            )
        received = []
        for message in batch:
            view = received_view(queue, message)
            with _in_flight_guard:
                _in_flight[view.lock_token] = _Held(lock, receiver, message)
            received.append(view)
        return received

    def _settle(self, message: ReceivedMessage, action: str) -> None:
        with _in_flight_guard:
            held = _in_flight.get(message.lock_token)
        if held is None:
            return  # the function settled it itself (dead-lettered by lock token)
        try:
            with held.lock:
                getattr(held.receiver, action)(held.message)
        except MessageAlreadySettled:
            pass
        except MessageLockLostError as error:
            raise MessageLockLost(str(error)) from error
        finally:
            # Settled or lost either way; any other error leaves the lock to expire.
            with _in_flight_guard:
                _in_flight.pop(message.lock_token, None)

    def complete(self, message: ReceivedMessage) -> None:
        self._settle(message, "complete_message")

    def abandon(self, message: ReceivedMessage) -> None:
        self._settle(message, "abandon_message")

    def renew_lock(self, message: ReceivedMessage) -> datetime:
        with _in_flight_guard:
            held = _in_flight.get(message.lock_token)
        if held is None:
            raise MessageLockLost(f"message {message.message_id} is no longer held")
        try:
            with held.lock:
                return held.receiver.renew_message_lock(held.message)
        except (MessageLockLostError, MessageAlreadySettled) as error:
            raise MessageLockLost(str(error)) from error

    def close(self) -> None:
        with self._guard:
            receivers, self._receivers = self._receivers, []
        # Each SDK receiver takes about half a second to detach; close them side by side.
        with ThreadPoolExecutor(max_workers=max(len(receivers), 1)) as pool:
            list(pool.map(_close_quietly, receivers))
        self.client.close()


def _close_quietly(receiver: ServiceBusReceiver) -> None:
    try:
        receiver.close()
    except ServiceBusError as error:
        log.debug("closing a receiver: %s", error)


def broker_client(connection: str) -> ServiceBusClient:
    """A connection string (a local broker, the emulator), or a namespace with an identity."""
    if "=" in connection:
        return ServiceBusClient.from_connection_string(connection)
    from azure.identity import DefaultAzureCredential  # noqa: PLC0415 - only against Azure

    return ServiceBusClient(connection, DefaultAzureCredential())
