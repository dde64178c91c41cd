"""The host's side of each binding: what devhost sends the worker is what the worker's own
converters accept, in the shapes the host and its extensions send."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from azure.functions.durable_functions import ActivityTriggerConverter
from azure.functions.servicebus import ServiceBusMessageInConverter
from azure.functions.timer import TimerRequestConverter
from azure_functions_runtime.bindings.datumdef import Datum
from multidict import CIMultiDict

from adapters.servicebus.messages import ReceivedMessage
from harness.devhost import bindings
from harness.devhost.protocol import function_rpc_pb2 as rpc

ENQUEUED = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)


def _message(body: bytes, **changes: object) -> ReceivedMessage:
    fields: dict[str, object] = {
        "queue": "work",
        "sequence_number": 7,
        "message_id": "m-1",
        "body": body,
        "correlation_id": "c-1",
        "content_type": None,
        "subject": None,
        "reply_to": None,
        "application_properties": {"app": "a"},
        "delivery_count": 2,
        "enqueued_time": ENQUEUED,
        "scheduled_enqueue_time": None,
        "locked_until": ENQUEUED + timedelta(minutes=1),
        "lock_token": "lock-1",
        "dead_letter_reason": None,
        "dead_letter_error_description": None,
    }
    fields |= changes
    return ReceivedMessage(**fields)  # type: ignore[arg-type]


def _datums(metadata: dict[str, rpc.TypedData]) -> dict[str, Datum]:
    """As the worker reads trigger metadata: every entry, eagerly (an int kind would fail here)."""
    return {key: Datum.from_typed_data(value) for key, value in metadata.items()}


def test_a_service_bus_message_goes_as_text_with_numbers_and_dates_as_json() -> None:
    body, metadata = bindings.servicebus_message(_message(b'{"OrderID": "o-1", "Lines": [1]}'))
    assert body.WhichOneof("data") == "string"
    assert metadata["DeliveryCount"].json == "2" and metadata["SequenceNumber"].json == "7"
    assert "sys" not in metadata and "ContentType" not in metadata  # unset properties are left out
    assert metadata["OrderID"].string == "o-1" and "Lines" not in metadata  # body properties, no arrays
    decoded = ServiceBusMessageInConverter.decode(
        Datum.from_typed_data(body), trigger_metadata=_datums(metadata)
    )
    assert decoded.get_body() == b'{"OrderID": "o-1", "Lines": [1]}'
    assert (decoded.message_id, decoded.delivery_count, decoded.lock_token) == ("m-1", 2, "lock-1")
    # The extension sends the UTC wall time without an offset, so the SDK hands back a naive one.
    assert decoded.enqueued_time_utc == ENQUEUED.replace(tzinfo=None)
    assert decoded.application_properties == {"app": "a"} and decoded.correlation_id == "c-1"


def test_a_body_property_is_bound_over_the_extensions_own_metadata_case_insensitively() -> None:
    """As the Functions host binds it (``WorkerFunctionInvoker.TransformInput`` then
    ``Utility.ApplyBindingData``): what the function reads as the delivery count is the body's."""
    body, metadata = bindings.servicebus_message(_message(b'{"deliverycount": 99, "MessageId": "forged"}'))
    assert "deliverycount" not in metadata  # the extension's spelling is kept
    decoded = ServiceBusMessageInConverter.decode(
        Datum.from_typed_data(body), trigger_metadata=_datums(metadata)
    )
    assert (decoded.delivery_count, decoded.message_id, decoded.lock_token) == (99, "forged", "lock-1")


def test_a_body_nested_past_json_nets_max_depth_binds_no_properties() -> None:
    shallow = "[" * 62 + "]" * 62
    deep = "[" * 64 + "]" * 64
    _, kept = bindings.servicebus_message(_message(f'{{"OrderID": "o-1", "x": {shallow}}}'.encode()))
    _, dropped = bindings.servicebus_message(_message(f'{{"OrderID": "o-1", "x": {deep}}}'.encode()))
    assert kept["OrderID"].string == "o-1"
    assert "OrderID" not in dropped and dropped["MessageId"].string == "m-1"


def test_a_body_too_deep_for_pythons_parser_is_still_bound() -> None:
    body, metadata = bindings.servicebus_message(_message(b"[" * 20_000 + b"]" * 20_000))
    assert body.string.startswith("[[[") and metadata["DeliveryCount"].json == "2"


def test_a_body_that_is_not_utf8_is_bound_as_text_lossily_never_failing() -> None:
    """As the extension's ``MessageToStringConverter``: .NET's UTF-8 with U+FFFD for each invalid
    sequence, so the function runs and reads a body that was never sent."""
    body, metadata = bindings.servicebus_message(_message(b'{"Customer": "Caf\xe9", "x": "\xf0\x9f"}'))
    assert body.string == '{"Customer": "Caf\ufffd", "x": "\ufffd"}'
    assert metadata["Customer"].string == "Caf\ufffd"
    decoded = ServiceBusMessageInConverter.decode(
        Datum.from_typed_data(body), trigger_metadata=_datums(metadata)
    )
    assert decoded.get_body() == '{"Customer": "Caf\ufffd", "x": "\ufffd"}'.encode()


def test_a_binary_trigger_gets_the_bytes_sent_and_no_body_property_over_its_metadata() -> None:
    """``dataType: binary``: ``MessageToByteArrayConverter``, and the host's ``ApplyBindingData``
    binds properties from a string only."""
    sent = b'{"DeliveryCount": 99, "MessageId": "forged", "Customer": "Caf\xe9"}'
    body, metadata = bindings.servicebus_message(_message(sent), bindings.BINARY)
    assert body.WhichOneof("data") == "bytes" and "Customer" not in metadata
    decoded = ServiceBusMessageInConverter.decode(
        Datum.from_typed_data(body), trigger_metadata=_datums(metadata)
    )
    assert decoded.get_body() == sent
    assert (decoded.delivery_count, decoded.message_id, decoded.lock_token) == (2, "m-1", "lock-1")


@pytest.mark.parametrize(
    ("declared", "bound"),
    [(None, "string"), ("string", "string"), ("BINARY", "binary"), ("Binary", "binary")],
)
def test_the_data_type_is_read_as_the_host_reads_it(declared: str | None, bound: str) -> None:
    trigger = {"type": "serviceBusTrigger"} | ({"dataType": declared} if declared else {})
    assert bindings.servicebus_data_type(trigger) == bound


def test_a_timer_without_its_monitor_has_no_schedule_status() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    info, metadata = bindings.timer_info(
        past_due=True, last=moment, next_=moment + timedelta(seconds=5), now=moment, monitored=False
    )
    assert json.loads(info.json) == {
        "Schedule": {"AdjustForDST": True},
        "ScheduleStatus": None,
        "IsPastDue": True,
    }
    assert TimerRequestConverter.decode(Datum.from_typed_data(info), trigger_metadata={}).past_due
    assert "TimerTrigger" in metadata
    monitored, _ = bindings.timer_info(
        past_due=False, last=moment, next_=moment + timedelta(seconds=5), now=moment, monitored=True
    )
    assert json.loads(monitored.json)["ScheduleStatus"]["Next"] == "2026-01-01T00:00:05+00:00"


@pytest.mark.parametrize(
    ("input_json", "kind", "decoded"),
    [
        ('{"OrderID": "o-1", "InstanceID": "o-1-1"}', "string", {"OrderID": "o-1", "InstanceID": "o-1-1"}),
        ('"plain text"', "string", "plain text"),
        (None, None, None),
    ],
)
def test_an_activity_input_is_bound_as_the_durable_extension_binds_it(
    input_json: str | None, kind: str | None, decoded: object
) -> None:
    data, metadata = bindings.activity_input("payload", "o-1-1", input_json)
    assert data.WhichOneof("data") == kind
    assert metadata["instanceId"].string == "o-1-1"
    if kind is not None:
        assert ActivityTriggerConverter.decode(Datum.from_typed_data(data), trigger_metadata={}) == decoded
        assert metadata["payload"] == data


def test_an_http_request_keeps_the_body_as_bytes_and_lowers_header_names() -> None:
    data, metadata = bindings.http_request(
        method="POST",
        url="http://127.0.0.1:7071/api/orders?a=1&empty=",
        headers={"Content-Type": "application/json"},
        query={"a": "1", "empty": ""},
        route_params={"order_id": "o-1"},
        body=b'{"OrderID": "o-1"}',
    )
    http = data.http
    assert http.body.bytes == b'{"OrderID": "o-1"}' and not http.HasField("rawBody")
    assert dict(http.headers) == {"content-type": "application/json"}
    assert dict(http.query) == {"a": "1"} and dict(http.params) == {"order_id": "o-1"}
    assert metadata["OrderID"].string == "o-1" and metadata["order_id"].string == "o-1"
    empty, _ = bindings.http_request(method="GET", url="u", headers={}, query={}, route_params={}, body=b"")
    assert not empty.http.HasField("body")


def test_a_header_sent_twice_reaches_the_worker_as_one_comma_joined_value() -> None:
    """As Kestrel and the host's ToRpcHttp (``StringValues.ToString()``) give it: a junk token
    then a valid one is "Bearer junk,Bearer valid", which no validator takes as the valid one."""
    headers = CIMultiDict([("Authorization", "Bearer junk"), ("authorization", "Bearer valid"), ("A", "1")])
    data, metadata = bindings.http_request(
        method="GET", url="u", headers=headers, query={}, route_params={}, body=b""
    )
    assert dict(data.http.headers) == {"authorization": "Bearer junk,Bearer valid", "a": "1"}
    assert json.loads(metadata["Headers"].json) == {"Authorization": "Bearer junk,Bearer valid", "A": "1"}


@pytest.mark.parametrize(
    ("number", "text"),
    [
        ("1.0", "1"),
        ("-2.50", "-2.5"),
        ("1e2", "100"),
        ("0.0001", "0.0001"),
        ("1e-5", "1E-05"),
        ("1e15", "1E+15"),
        ("123456789012345.0", "123456789012345"),
        ("7", "7"),
        ("-0.0", "-0"),
    ],
)
def test_a_json_body_number_is_bound_as_json_nets_text(number: str, text: str) -> None:
    """``(string)JValue``: Json.NET reads a number with a fraction or exponent as a Double and
    .NET writes it without ".0", in E notation from 1E+15 (so a body's ``"1.0"`` property that
    shadows metadata has the host's value)."""
    _, metadata = bindings.http_request(
        method="POST", url="u", headers={}, query={}, route_params={}, body=f'{{"n": {number}}}'.encode()
    )
    assert metadata["n"].string == text
