"""The test broker against Service Bus's documented behaviour, through the real azure-servicebus SDK.

Each test names the reference it follows; none is written from what the broker happened to do.
Where a reference gives the service's answer only in part (the condition of a refusal, say),
``harness/standins/amqp_broker/limits.py`` says what was found and what the broker chose, and the test
asserts what the reference does say and how the SDK surfaces it.
"""

import asyncio
import socket
import struct
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.servicebus import (
    NEXT_AVAILABLE_SESSION,
    AutoLockRenewer,
    ServiceBusClient,
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceivedMessage,
)
from azure.servicebus.aio import AutoLockRenewer as AsyncAutoLockRenewer
from azure.servicebus.aio import ServiceBusClient as AsyncServiceBusClient
from azure.servicebus.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from azure.servicebus.exceptions import MessageSizeExceededError, ServiceBusError
from proton import UNDESCRIBED, Array, Data, Described, Message, symbol, uint, ulong
from proton.utils import BlockingConnection

from harness.standins.amqp_broker.frames import LenientSocket
from tests.support.broker import BrokerFactory
from tests.support.broker_clients import PLAIN, SHORT_LOCK, receive_until

QUOTAS = "https://learn.microsoft.com/azure/service-bus-messaging/service-bus-quotas"
KB = 1024


# --- message properties: the quotas page --------------------------------------------------------


def test_one_application_property_over_32_kb_is_refused(servicebus_broker_with: BrokerFactory) -> None:
    """QUOTAS, "Message property size": "Maximum message property size for each property is 32 KB".
    The service's answer is an error no SDK maps to a specific exception, "The service was unable
    to process the request" (https://github.com/Azure/azure-sdk-for-net/issues/15325): the Python
    SDK raises a plain ServiceBusError (retried first; retry_total=0 here)."""
    broker = servicebus_broker_with({"q": PLAIN})
    with (
        ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client,
        client.get_queue_sender("q") as sender,
    ):
        with pytest.raises(ServiceBusError, match="unable to process the request") as raised:
            sender.send_messages(ServiceBusMessage("b", application_properties={"big": "x" * (33 * KB)}))
        assert type(raised.value) is ServiceBusError
        # Just under the limit (a string's encoding adds 5 bytes to its length): accepted.
        sender.send_messages(ServiceBusMessage("b", application_properties={"fits": "x" * (32 * KB - 5)}))
    assert broker.queue_depth("q") == 1


def test_properties_over_64_kb_together_raise_message_size_exceeded(
    servicebus_broker_with: BrokerFactory,
) -> None:
    """QUOTAS: "Cumulative size of all properties can't exceed 64 KB. This limit applies to the
    entire header of the brokered message". The service fails the send with message-size-exceeded
    ("The size quota for this stream (65536) has been exceeded",
    https://github.com/rebus-org/Rebus.AzureServiceBus/issues/35): MessageSizeExceededError."""
    broker = servicebus_broker_with({"q": PLAIN})
    each_under_32_kb: dict[str | bytes, Any] = {f"p{i}": "x" * (30 * KB) for i in range(3)}
    with (
        ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client,
        client.get_queue_sender("q") as sender,
    ):
        with pytest.raises(MessageSizeExceededError, match=r"\(65536\)"):
            sender.send_messages(ServiceBusMessage("b", application_properties=each_under_32_kb))
        # System properties count too: application properties of 65,450 bytes (each under 32 KB)
        # fit alone, but not with the SDK's header and a message ID of 128 characters.
        near_64_kb: dict[str | bytes, Any] = {"p0": "x" * (32 * KB - 5), "p1": "x" * 32657}
        with pytest.raises(MessageSizeExceededError, match=r"\(65536\)"):
            sender.send_messages(
                ServiceBusMessage("b", application_properties=near_64_kb, message_id="m" * 128)
            )
        two: dict[str | bytes, Any] = {f"p{i}": "x" * (30 * KB) for i in range(2)}
        sender.send_messages(ServiceBusMessage("b", application_properties=two, message_id="m" * 128))
    assert broker.queue_depth("q") == 1


def test_a_batch_with_one_message_over_the_property_quota_is_refused_whole(
    servicebus_broker_with: BrokerFactory,
) -> None:
    """QUOTAS applies per message, and a batch is one transfer the service accepts or refuses."""
    broker = servicebus_broker_with({"q": PLAIN})
    with (
        ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client,
        client.get_queue_sender("q") as sender,
    ):
        batch = sender.create_message_batch()
        batch.add_message(ServiceBusMessage("fine"))
        batch.add_message(ServiceBusMessage("b", application_properties={"big": "x" * (33 * KB)}))
        with pytest.raises(ServiceBusError, match="unable to process the request"):
            sender.send_messages(batch)
    assert broker.queue_depth("q") == 0


# --- lock renewal of many messages on one receiver ----------------------------------------------


def test_auto_lock_renewer_keeps_ten_locks_on_one_receiver(servicebus_broker_with: BrokerFactory) -> None:
    """Microsoft's sample ``samples/sync_samples/auto_lock_renew.py`` (azure-sdk-for-python,
    servicebus): ten messages registered with one AutoLockRenewer on one receiver, their locks
    renewed concurrently over ``$management`` until they are settled."""
    broker = servicebus_broker_with({"q": SHORT_LOCK})  # PT5S
    failures: list[BaseException] = []
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(10)])
        with (
            AutoLockRenewer() as renewer,
            client.get_queue_receiver("q") as receiver,
        ):
            messages = receive_until(receiver, 10)
            assert len(messages) == 10
            for message in messages:
                renewer.register(
                    receiver,
                    message,
                    max_lock_renewal_duration=120,
                    on_lock_renew_failure=lambda _, error: failures.append(error or Exception("renewal")),
                )
            # The 5 s locks outlive 6 s of the broker's time only if the renewals land. The clock
            # moves a second at a time, each step waiting for every lock to be renewed: the
            # renewer renews a lock with 10 s or less to go by its own clock, so the broker's may
            # not run far ahead of it.
            received_at = broker.clock.now()
            while broker.clock.now() - received_at < 6:
                broker.advance(1)
                tokens = [str(m.lock_token) for m in messages]
                assert broker.wait_for_renewals("q", tokens, beyond=4), (
                    "every lock renewed past the broker's clock"
                )
            for message in messages:
                receiver.complete_message(message)
    assert failures == []
    assert broker.queue_depth("q") == 0


def test_async_auto_lock_renewer_keeps_ten_locks_on_one_receiver(
    servicebus_broker_with: BrokerFactory,
) -> None:
    """Microsoft's ``samples/async_samples/auto_lock_renew_async.py``: the same with the aio SDK."""
    broker = servicebus_broker_with({"q": SHORT_LOCK})
    failures: list[BaseException] = []

    async def on_failure(_: Any, error: BaseException | None) -> None:
        failures.append(error or Exception("renewal"))

    async def run() -> None:
        async with AsyncServiceBusClient.from_connection_string(broker.connection_string) as client:
            async with client.get_queue_sender("q") as sender:
                await sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(10)])
            renewer = AsyncAutoLockRenewer()
            async with client.get_queue_receiver("q") as receiver:
                messages: list[ServiceBusReceivedMessage] = []
                deadline = time.monotonic() + 10
                while len(messages) < 10 and time.monotonic() < deadline:
                    messages += await receiver.receive_messages(max_message_count=10, max_wait_time=2)
                assert len(messages) == 10
                for message in messages:
                    renewer.register(
                        receiver, message, max_lock_renewal_duration=120, on_lock_renew_failure=on_failure
                    )
                received_at = broker.clock.now()
                while broker.clock.now() - received_at < 6:
                    broker.advance(1)
                    tokens = [str(m.lock_token) for m in messages]
                    # Off the event loop, so the renewer's tasks run while the broker is waited on.
                    renewed = await asyncio.to_thread(broker.wait_for_renewals, "q", tokens, 4)
                    assert renewed, "every lock renewed past the broker's clock"
                for message in messages:
                    await receiver.complete_message(message)
            await renewer.close()

    asyncio.run(run())
    assert failures == []
    assert broker.queue_depth("q") == 0


def _uuid_array(tokens: list[uuid.UUID]) -> Array:
    # Proton's annotations say a descriptor is AMQP data; UNDESCRIBED is its documented marker.
    return Array(UNDESCRIBED, Data.UUID, *tokens)  # type: ignore[arg-type]


def test_one_renew_lock_request_renews_every_token_it_carries(servicebus_broker_with: BrokerFactory) -> None:
    """The AMQP management operation "Message renew lock"
    (https://learn.microsoft.com/azure/service-bus-messaging/service-bus-amqp-request-response):
    the request's ``lock-tokens`` is an array of uuids, the response's ``expirations`` an array of
    timestamps, one per token. Sent here as a bare AMQP request: the SDK's public API sends one."""
    broker = servicebus_broker_with({"q": PLAIN})  # PT1M locks
    with ServiceBusClient.from_connection_string(broker.connection_string) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(10)])
        with client.get_queue_receiver("q") as receiver:
            messages = receive_until(receiver, 10)
            tokens = [uuid.UUID(str(m.lock_token)) for m in messages]
            broker.advance(45)
            connection = BlockingConnection(broker.url, timeout=10)
            try:
                replies = connection.create_receiver("q/$management", credit=1)
                requests = connection.create_sender("q/$management")
                requests.send(
                    Message(
                        id="renew-10",
                        reply_to="renew-replies",
                        properties={"operation": "com.microsoft:renew-lock"},
                        body={"lock-tokens": _uuid_array(tokens)},
                    )
                )
                reply = replies.receive(timeout=10)
            finally:
                connection.close()
            broker.advance(30)  # 75 s after the receive: past the first lock, within the renewed one
            for message in messages:
                receiver.complete_message(message)
    assert reply.correlation_id == "renew-10"
    assert reply.properties is not None and reply.properties["statusCode"] == 200
    assert isinstance(reply.body, dict)
    expirations = reply.body["expirations"]
    assert isinstance(expirations, Array) and len(expirations.elements) == 10
    assert broker.queue_depth("q") == 0


def _encode_frame(channel: int, code: int, fields: list[Any]) -> bytes:
    data = Data()
    data.put_object(Described(ulong(code), fields))
    body = data.encode()
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def _decode_frame(frame: bytes) -> list[Any]:
    data = Data()
    data.decode(frame[8:])
    data.rewind()
    data.next()
    value = data.get_object()
    assert isinstance(value, Described)
    assert isinstance(value.value, list)
    return value.value


def _read_frames(sock: socket.socket, count: int) -> list[bytes]:
    buffer = b""
    frames: list[bytes] = []
    sock.settimeout(5)
    while len(frames) < count:
        buffer += sock.recv(65536)
        while len(buffer) >= 8 and len(buffer) >= (size := struct.unpack(">I", buffer[:4])[0]):
            frames.append(buffer[:size])
            buffer = buffer[size:]
    return frames


def test_a_close_with_an_error_always_carries_info() -> None:
    """azure-servicebus's ``_pyamqp/_connection.py`` (``_incoming_close``) reads the close error's
    condition, description and info by index; Service Bus always sends the three. Proton leaves an
    empty info out, which the SDK raised as IndexError (issue 28 item 11): the broker adds it."""
    broker_side, client_side = socket.socketpair()
    try:
        broker_side.setblocking(False)
        shim = LenientSocket(broker_side)
        error = Described(symbol("amqp:error"), [symbol("amqp:connection:framing-error"), "bad frame"])
        close = _encode_frame(0, 0x18, [error])
        assert shim.send(close) == len(close)
        [received] = _read_frames(client_side, 1)
        [sent_error] = _decode_frame(received)
        assert isinstance(sent_error, Described)
        assert isinstance(sent_error.value, list)
        condition, description, info = sent_error.value
        assert (condition, description) == ("amqp:connection:framing-error", "bad frame")
        assert isinstance(info, dict) and info
    finally:
        broker_side.close()
        client_side.close()


def test_delivery_ids_out_of_order_are_taken_and_answered_with_the_clients_ids() -> None:
    """Microsoft.Azure.Amqp, on which Service Bus runs, takes any delivery-id as the session's
    next (``AmqpSession.cs``, ``OnReceiveDelivery``: "this is always the next expected delivery
    id"), and its dispositions name the delivery by the id the client sent. The SDK's threads
    send ids out of order when they share a receiver; proton would close the connection."""
    broker_side, client_side = socket.socketpair()
    try:
        broker_side.setblocking(True)
        shim = LenientSocket(broker_side)
        # The client's begin on its channel 3; the broker answers on its channel 0.
        client_side.sendall(_encode_frame(3, 0x11, [None, uint(0), uint(100), uint(100)]))
        for delivery_id in (7, 5):
            client_side.sendall(_encode_frame(3, 0x14, [uint(0), uint(delivery_id), b"tag", uint(0)]))
        seen: list[int] = []
        received = b""
        while len(seen) < 2:
            received += shim.recv(65536)
            frames = []
            rest = received
            while len(rest) >= 8 and len(rest) >= (size := struct.unpack(">I", rest[:4])[0]):
                frames.append(rest[:size])
                rest = rest[size:]
            seen = [int(_decode_frame(f)[1]) for f in frames if f[10] == 0x14]
        assert seen == [7, 8]  # proton sees the ids it expects
        begin = _encode_frame(0, 0x11, [uint(3), uint(0), uint(100), uint(100)])
        accepted = Described(ulong(0x24), [])
        dispositions = _encode_frame(0, 0x15, [True, uint(7), uint(8), True, accepted])
        assert shim.send(begin + dispositions) == len(begin) + len(dispositions)
        _, first, second = _read_frames(client_side, 3)
        assert [int(_decode_frame(f)[1]) for f in (first, second)] == [7, 5]
    finally:
        broker_side.close()
        client_side.close()


# --- sessions -----------------------------------------------------------------------------------


@pytest.mark.parametrize("session_id", ["s1", NEXT_AVAILABLE_SESSION])
def test_a_session_receiver_on_a_queue_without_sessions_is_refused(
    servicebus_broker_with: BrokerFactory, session_id: Any
) -> None:
    """Service Bus refuses a sessionful receiver's attach on an entity that does not require
    sessions ("A sessionful message receiver cannot be created on an entity that does not require
    sessions", ``limits.SESSION_NOT_REQUIRED_DESCRIPTION`` has the source); the SDK raises the
    detach's error from the receiver, where it had silently received nothing."""
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("waiting"))
        with (
            pytest.raises(ServiceBusError, match="does not require sessions") as raised,
            client.get_queue_receiver("q", session_id=session_id, max_wait_time=2) as receiver,
        ):
            receiver.receive_messages(max_wait_time=1)
    assert "amqp:not-allowed" in str(raised.value)
    assert broker.queue_depth("q") == 1  # nothing was taken


# --- any AMQP body ------------------------------------------------------------------------------


def test_a_value_body_with_a_binary_map_key_is_stored_and_delivered(
    servicebus_broker_with: BrokerFactory,
) -> None:
    """The SDK's AmqpAnnotatedMessage (https://learn.microsoft.com/python/api/azure-servicebus/
    azure.servicebus.amqp.amqpannotatedmessage): a value body is "one amqp-value section" holding
    "a single AMQP value", and an AMQP map's keys may be of any type (AMQP 1.0 messaging, 3.2.8
    amqp-value; types, 1.6.23 map). Service Bus stores the body as sent and hands it back."""
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(AmqpAnnotatedMessage(value_body={b"key": b"value", b"other": 1}))
        with client.get_queue_receiver("q") as receiver:
            [message] = receive_until(receiver, 1)
            receiver.complete_message(message)
    assert message.body_type == AmqpMessageBodyType.VALUE
    assert message.body == {b"key": b"value", b"other": 1}


# --- time to live and state ---------------------------------------------------------------------


def test_time_to_live_is_reported_as_the_service_applies_it(servicebus_broker_with: BrokerFactory) -> None:
    """https://learn.microsoft.com/azure/service-bus-messaging/message-expiration and the SDK's
    ``ServiceBusReceivedMessage.time_to_live``: "When not set explicitly, the assumed value is the
    DefaultTimeToLive for the respective queue or topic. A message-level time-to-live value cannot
    be longer than the entity's time-to-live setting and it is silently adjusted if it does."
    ``expires_at_utc`` is the enqueued time plus that."""
    broker = servicebus_broker_with({"q": {**PLAIN, "DefaultMessageTimeToLive": "PT1M"}, "forever": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(
                [
                    ServiceBusMessage("capped", message_id="capped", time_to_live=timedelta(hours=1)),
                    ServiceBusMessage("own", message_id="own", time_to_live=timedelta(seconds=20)),
                    ServiceBusMessage("default", message_id="default"),
                ]
            )
        with client.get_queue_sender("forever") as sender:
            sender.send_messages(ServiceBusMessage("none", message_id="none"))
        with client.get_queue_receiver("q") as receiver:
            received = {m.message_id: m for m in receive_until(receiver, 3)}
            for message in received.values():
                receiver.complete_message(message)
        with client.get_queue_receiver("forever") as receiver:
            [forever] = receive_until(receiver, 1)
            receiver.complete_message(forever)
    ttls = {name: m.time_to_live for name, m in received.items()}
    assert ttls == {
        "capped": timedelta(minutes=1),
        "own": timedelta(seconds=20),
        "default": timedelta(minutes=1),
    }
    for message in received.values():
        assert message.enqueued_time_utc is not None and message.time_to_live is not None
        assert message.expires_at_utc == message.enqueued_time_utc + message.time_to_live
    # No TTL on the message or the queue (DefaultMessageTimeToLive is TimeSpan.MaxValue).
    assert forever.time_to_live is None
    assert forever.expires_at_utc is None


def test_a_peeked_scheduled_message_reports_its_state_scheduled(
    servicebus_broker_with: BrokerFactory,
) -> None:
    """The SDK's ``ServiceBusReceivedMessage.state`` ("Can be Active, Deferred, or Scheduled"),
    read from the ``x-opt-message-state`` annotation Service Bus sets; a scheduled message is only
    seen by peeking (https://learn.microsoft.com/azure/service-bus-messaging/message-sequencing)."""
    broker = servicebus_broker_with({"q": PLAIN})
    with ServiceBusClient.from_connection_string(broker.connection_string, retry_total=0) as client:
        with client.get_queue_sender("q") as sender:
            sender.send_messages(ServiceBusMessage("now", message_id="now"))
            sender.schedule_messages(
                ServiceBusMessage("later", message_id="later"), datetime.now(UTC) + timedelta(minutes=5)
            )
        with client.get_queue_receiver("q") as receiver:
            peeked = {m.message_id: m.state for m in receiver.peek_messages(max_message_count=10)}
    assert peeked == {"now": ServiceBusMessageState.ACTIVE, "later": ServiceBusMessageState.SCHEDULED}
