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
from datetime import datetime

from azure.servicebus import ServiceBusClient, ServiceBusReceiver
from azure.servicebus.exceptions import MessageAlreadySettled, MessageLockLostError, ServiceBusError

from adapters.servicebus.azure import HELD
from adapters.servicebus.messages import (
    RECEIVE_WAIT_SECONDS,
    MessageLockLost,
    QueueConfig,
    ReceivedMessage,
    from_sdk,
)

log = logging.getLogger("adapters.servicebus.local_bus")


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
            view = from_sdk(queue, message)
            HELD.hold(view.lock_token, lock, receiver, message)
            received.append(view)
        return received

    def _settle(self, message: ReceivedMessage, action: str) -> None:
        held = HELD.get(message.lock_token)
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
            HELD.release(message.lock_token)

    def complete(self, message: ReceivedMessage) -> None:
        self._settle(message, "complete_message")

    def abandon(self, message: ReceivedMessage) -> None:
        self._settle(message, "abandon_message")

    def renew_lock(self, message: ReceivedMessage) -> datetime:
        held = HELD.get(message.lock_token)
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
