"""A shim between each client socket and proton: two leniencies of Service Bus's AMQP stack that
proton does not have, applied to the frames as they pass.

1. **Delivery ids out of order.** azure-servicebus's pyamqp session assigns a transfer's
   delivery-id and writes the frame without a lock (``Session._outgoing_transfer``), so threads
   sharing a receiver (``AutoLockRenewer`` renewing ten messages at once, as Microsoft's
   ``auto_lock_renew`` sample does) send ids out of order or twice. Service Bus runs on
   Microsoft.Azure.Amqp, whose incoming session channel takes any delivery-id and expects the next
   one after it (``AmqpSession.SessionChannel.OnReceiveDelivery``: "this is always the next
   expected delivery id", https://github.com/Azure/azure-amqp/blob/master/src/AmqpSession.cs);
   proton closes the connection with ``amqp:session:invalid-field`` ("sequencing error"). So the
   shim renumbers each new delivery to the id proton expects, and numbers the broker's
   dispositions for it back to the client's id, as the service would have answered.
2. **Close frames carry ``info``.** The SDK reads a close frame's error as a three-field list
   (``Connection._incoming_close`` indexes ``info``), and proton leaves an empty ``info`` out, so
   a close with an error from proton (a framing error, say) reaches the client as ``IndexError``.
   The shim adds an ``info`` map to any close error that has none.

Every other frame passes byte for byte. The shim runs on the reactor thread, in the socket calls
proton's IO handler makes (``recv`` and ``send``), so it needs no locking.
"""

import select
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

from proton import Data, DataException, Described, symbol, uint, ulong

from harness.standins.amqp_broker import codec

_PROTOCOL_HEADER = b"AMQP"
_FRAME_HEADER = 8
_AMQP_FRAME = 0
_BEGIN = 0x11
_TRANSFER = 0x14
_DISPOSITION = 0x15
_CLOSE = 0x18
_READ = (_BEGIN, _TRANSFER, _DISPOSITION, _CLOSE)  # the broker's performatives the shim decodes
# The client's: only transfers are rewritten, and only their heads are read whole before they go
# on. A client's disposition can be kilobytes (a dead-letter reason and description of 4096
# characters each, azure-servicebus's modified outcome): held whole, it would overflow proton's
# input buffer ("unable to process all bytes"), so it passes as it comes.
_READ_FROM_CLIENT = (_TRANSFER,)
_SMALL_ULONG_DESCRIPTOR = b"\x00\x53"  # how both the SDK and proton write a performative's code
_INFO = {symbol("source"): "harness.standins.amqp_broker"}
_WAIT_FOR_HEAD = 5.0  # seconds to wait for the rest of a frame's head split across reads


@dataclass
class _Channel:
    """One session, seen from the client's channel number."""

    expected: int | None = None  # the delivery-id proton expects next
    continuing: dict[int, int] = field(default_factory=dict)  # link handle -> id of a multi-frame delivery
    client_ids: dict[int, int] = field(default_factory=dict)  # renumbered id -> the client's id


class LenientSocket:
    """Wraps an accepted socket; proton's IO handler reads and writes through it."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._held = bytearray()  # client bytes: the start of a frame whose head is not all here
        self._in_passing = 0  # client bytes of the current frame still to pass untouched
        self._out_passing = 0  # the same, broker to client
        self._channels: dict[int, _Channel] = {}
        self._local_to_client: dict[int, int] = {}  # the broker's channel -> the client's

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    # --- client to broker ------------------------------------------------------------------

    def recv(self, capacity: int) -> bytes:
        # What is handed on must fit proton's capacity: the held start of a frame comes first, and
        # renumbering can lengthen a transfer's head by 4 bytes (a delivery-id written in one byte
        # becomes a uint), so at most half of what is left is read. (Proton's input buffer is
        # kilobytes and a frame's head tens of bytes, so this never starves.)
        size = max((capacity - len(self._held)) // 2, 1)
        chunk = self._sock.recv(size)
        while True:
            if not chunk:  # EOF: whatever was held goes on as it is
                out, self._held = bytes(self._held), bytearray()
                return out
            out = self._incoming(chunk)
            if out:
                return out
            # All that was read starts a frame's head, and an empty answer would mean EOF.
            ready, _, _ = select.select([self._sock], [], [], _WAIT_FOR_HEAD)
            chunk = self._sock.recv(size) if ready else b""

    def _incoming(self, chunk: bytes) -> bytes:
        data = bytes(self._held) + chunk
        self._held = bytearray()
        out = bytearray()
        offset = 0
        while offset < len(data):
            if self._in_passing:
                step = min(self._in_passing, len(data) - offset)
                out += data[offset : offset + step]
                self._in_passing -= step
                offset += step
                continue
            frame = _read_frame(data[offset:], _READ_FROM_CLIENT)
            if frame is None:
                self._held = bytearray(data[offset:])
                break
            replaced = self._client_frame(frame) if frame.performative is not None else None
            if replaced is None:
                self._in_passing = frame.size
                continue
            out += replaced
            offset += frame.head_length
            self._in_passing = frame.size - frame.head_length
        return bytes(out)

    def _client_frame(self, frame: "_Frame") -> bytes | None:
        """The head proton should see instead of the frame's, or ``None`` to pass it as it is."""
        assert frame.performative is not None
        code, fields = frame.performative
        if code != _TRANSFER or not fields:
            return None
        channel = self._channels.setdefault(frame.channel, _Channel())
        handle = int(fields[0])
        sent_id = int(fields[1]) if len(fields) > 1 and fields[1] is not None else None
        if handle in channel.continuing:
            renumbered = channel.continuing[handle]
        elif sent_id is None:
            return None
        else:
            renumbered = sent_id if channel.expected is None else channel.expected
            channel.expected = (renumbered + 1) % 2**32
            if renumbered != sent_id:
                channel.client_ids[renumbered] = sent_id
        if len(fields) > 5 and fields[5]:  # more: the delivery goes on in the next frame
            channel.continuing[handle] = renumbered
        else:
            channel.continuing.pop(handle, None)
        if sent_id is None or sent_id == renumbered:
            return None
        fields[1] = uint(renumbered)
        return frame.with_performative(code, fields)

    # --- broker to client ------------------------------------------------------------------

    def send(self, data: bytes) -> int:
        passing = self._out_passing
        out, consumed = self._outgoing(data)
        if out == data[:consumed]:
            sent = self._sock.send(out) if out else 0
            if sent < consumed:  # the frame boundaries are where the bytes sent end
                self._out_passing = _passing_after(data, passing, sent)
            return sent
        # Rewritten frames differ in length from proton's, so they go whole before proton is told
        # its bytes went (it keeps no record of the shim's); rare: a renumbered delivery's
        # disposition, or a close with an error.
        self._sock.settimeout(30)
        try:
            self._sock.sendall(out)
        finally:
            self._sock.setblocking(False)
        return consumed

    def _outgoing(self, data: bytes) -> tuple[bytes, int]:
        out = bytearray()
        offset = 0
        while offset < len(data):
            if self._out_passing:
                step = min(self._out_passing, len(data) - offset)
                out += data[offset : offset + step]
                self._out_passing -= step
                offset += step
                continue
            frame = _read_frame(data[offset:])
            if frame is None:
                break  # proton offers the rest again on its next write
            replaced = self._broker_frame(frame) if frame.performative is not None else None
            if replaced is None:
                self._out_passing = frame.size
                continue
            out += replaced
            offset += frame.head_length
            self._out_passing = frame.size - frame.head_length
        return bytes(out), offset

    def _broker_frame(self, frame: "_Frame") -> bytes | None:
        assert frame.performative is not None
        code, fields = frame.performative
        if code == _BEGIN and fields and fields[0] is not None:
            self._local_to_client[frame.channel] = int(fields[0])
        elif code == _CLOSE and fields and isinstance(fields[0], Described):
            error: list[Any] = list(fields[0].value) if isinstance(fields[0].value, list) else []
            if len(error) < 3 or error[2] is None:
                condition_and_description = [*error, None, None][:2]
                info: Any = _INFO
                fields[0] = Described(fields[0].descriptor, [*condition_and_description, info])
                return frame.with_performative(code, fields)
        elif code == _DISPOSITION and len(fields) > 1 and fields[0]:  # role receiver: client transfers
            channel = self._channels.get(self._local_to_client.get(frame.channel, -1))
            if channel is not None and channel.client_ids:
                return _dispositions(frame, fields, channel)
        return None


@dataclass
class _Frame:
    size: int
    channel: int
    head_length: int  # frame header, extended header and performative: what may be replaced
    header: bytes  # frame header and extended header
    performative: tuple[int, list[Any]] | None  # code and fields, for the frames the shim reads

    def with_performative(self, code: int, fields: list[Any]) -> bytes:
        encoded = _encode(code, fields)
        size = self.size - self.head_length + len(self.header) + len(encoded)
        return struct.pack(">I", size) + self.header[4:] + encoded


def _read_frame(data: bytes, read: tuple[int, ...] = _READ) -> _Frame | None:
    """The frame starting ``data``, ``None`` until enough of its head is there to tell; the
    performatives in ``read`` decoded, others passed plain."""
    if len(data) < _FRAME_HEADER:
        return None
    # A protocol header ("AMQP", then 0-3 for plain or SASL, 1, 0, 0) passes as a plain 8 bytes.
    header = data[:4] == _PROTOCOL_HEADER
    size = _FRAME_HEADER if header else struct.unpack(">I", data[:4])[0]
    doff = data[4] * 4
    channel = struct.unpack(">H", data[6:8])[0]
    plain = _Frame(size, channel, size, data[:_FRAME_HEADER], None)
    if header or data[5] != _AMQP_FRAME or size < doff + 3 or doff < _FRAME_HEADER:
        return plain  # SASL, a heartbeat, or not ours to read
    if len(data) < doff + 3:
        return None
    if data[doff : doff + 2] != _SMALL_ULONG_DESCRIPTOR or data[doff + 2] not in read:
        return plain
    decoded = _performative(data[doff : min(size, len(data))])
    if decoded is None:
        return None if len(data) < size else plain
    fields, consumed = decoded
    return _Frame(size, channel, doff + consumed, data[:doff], (data[doff + 2], fields))


def _performative(body: bytes) -> tuple[list[Any], int] | None:
    """A performative's fields and encoded length; ``None`` if ``body`` does not hold it whole."""
    performative = Data()
    try:
        consumed = performative.decode(body)
    except DataException:
        return None
    performative.rewind()
    performative.next()
    value = performative.get_object()
    fields = value.value if isinstance(value, Described) and isinstance(value.value, list) else []
    return [codec.owned(item) for item in fields], consumed


def _passing_after(data: bytes, passing: int, sent: int) -> int:
    """Bytes of the frame that ``sent`` bytes of ``data`` end in still to go, given ``passing``
    left of a frame when ``data`` began."""
    offset = 0
    while True:
        if passing:
            step = min(passing, sent - offset)
            offset += step
            passing -= step
            if offset >= sent:
                return passing
        frame = _read_frame(data[offset:])
        assert frame is not None, "proton writes whole frames"
        passing = frame.size


def _dispositions(frame: _Frame, fields: list[Any], channel: _Channel) -> bytes:
    """The broker's disposition, one per delivery, with the ids the client gave them."""
    first = int(fields[1])
    last = int(fields[2]) if len(fields) > 2 and fields[2] is not None else first
    settled = len(fields) > 3 and bool(fields[3])
    frames = bytearray()
    for renumbered in range(first, last + 1):
        client_id = channel.client_ids.get(renumbered, renumbered)
        if settled:
            channel.client_ids.pop(renumbered, None)
        one = [*fields]
        one[1] = uint(client_id)
        if len(one) > 2:
            one[2] = None
        frames += frame.with_performative(_DISPOSITION, one)
    return bytes(frames)


def _encode(code: int, fields: list[Any]) -> bytes:
    data = Data()
    data.put_object(Described(ulong(code), fields))
    return data.encode()
