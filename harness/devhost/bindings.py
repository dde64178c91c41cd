"""The host's side of each binding: trigger data as the Functions host and its extensions send it
to a language worker, and the worker's return values read back as the host reads them.

Each builder returns protocol messages (``harness.devhost.protocol``); the worker's own converters in
``azure.functions`` then make the objects the function receives. Shapes follow the host and
its extensions (Service Bus 5.x, Timers, HTTP, Durable Functions out-of-proc), for a worker that
declares the capabilities the Python worker declares (``RawHttpBodyBytes``, ``RpcHttpBodyOnly``,
``RpcHttpTriggerMetadataRemoved``, ``TypedDataCollection``).
"""

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from adapters.servicebus.messages import ReceivedMessage
from harness.devhost.protocol import function_rpc_pb2 as rpc


def _net_time(moment: datetime, offset: str = "") -> str:
    """A DateTime as Newtonsoft writes it: up to 7 fractional digits, trailing zeros dropped, and
    the offset only for a local or offset kind (``+00:00`` on Azure, whose clock is UTC)."""
    utc = moment.astimezone(UTC)
    fraction = f"{utc.microsecond:06d}0".rstrip("0")
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + offset


def _json(value: object) -> rpc.TypedData:
    """Anything but a string or bytes reaches the worker as JSON: the host sends no int kinds."""
    return rpc.TypedData(json=json.dumps(value, separators=(",", ":")))


def _properties(value: object) -> dict[str, rpc.TypedData]:
    """The host also binds a JSON object trigger value's top-level properties by name (arrays
    and nulls left out): scalars as their text, objects as JSON."""
    if not isinstance(value, dict):
        return {}
    return {
        # str(True) is "True", as .NET writes a bool.
        str(key): _json(item) if isinstance(item, dict) else rpc.TypedData(string=_net_text(item))
        for key, item in value.items()
        if item is not None and not isinstance(item, list)
    }


def _net_text(item: object) -> str:
    """A JSON scalar as ``(string)JValue`` gives it. Json.NET reads a number with a fraction or
    an exponent as a Double, whose .NET text (the "G" format, shortest round-trip digits since
    .NET Core 3.0) has no ".0" and switches to ``E+XX`` outside 1E-05..1E+15: 1.0 is "1", 1e15
    is "1E+15", where Python writes "1.0" and "1000000000000000.0"."""
    if not isinstance(item, float):
        return str(item)
    if math.isnan(item) or math.isinf(item):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(item)]
    if item == 0:
        return "-0" if math.copysign(1.0, item) < 0 else "0"
    number = Decimal(repr(item)).normalize()  # repr: the shortest digits that round-trip
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    scientific = len(digits) + exponent - 1
    if -5 < scientific < 15:
        return format(number, "f")
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return f"{'-' if sign else ''}{mantissa}E{'+' if scientific >= 0 else '-'}{abs(scientific):02d}"


# Json.NET's default MaxDepth, which the host's JObject.Parse applies: a deeper body is not
# parsed, and, as the host swallows that error, binds no properties (the message is still bound).
JSON_MAX_DEPTH = 64


def _depth(value: object) -> int:
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            todo += [(child, level + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return deepest


def _json_body_properties(body: str) -> dict[str, rpc.TypedData]:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    return _properties(value) if _depth(value) <= JSON_MAX_DEPTH else {}


def _bind_over(metadata: dict[str, rpc.TypedData], properties: dict[str, rpc.TypedData]) -> None:
    """The host's ``ApplyBindingData``: a JSON body's properties are set over what the extension
    bound, in a case-insensitive dictionary, so a body's ``deliverycount`` replaces the value of
    ``DeliveryCount`` under the extension's own spelling."""
    spelling = {key.lower(): key for key in metadata}
    for key, value in properties.items():
        metadata[spelling.get(key.lower(), key)] = value


def binding(name: str, data: rpc.TypedData) -> rpc.ParameterBinding:
    return rpc.ParameterBinding(name=name, data=data)


# --- HTTP ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpReply:
    status: int
    headers: dict[str, str]
    body: bytes


def http_request(
    *,
    method: str,
    url: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
    route_params: Mapping[str, str],
    body: bytes,
) -> tuple[rpc.TypedData, dict[str, rpc.TypedData]]:
    """An RpcHttp as the host sends it to a worker with RawHttpBodyBytes and RpcHttpBodyOnly:
    header names lower-cased, empty query values left out, the body as bytes and only when there
    is one. The trigger metadata keeps ``Query``, ``Headers``, each query and route parameter and
    a JSON body's properties (the request object itself is left out: RpcHttpTriggerMetadataRemoved)."""
    joined = _joined_headers(headers)
    http = rpc.RpcHttp(
        method=method,
        url=url,
        headers={name.lower(): value for name, value in joined.items()},
        query={name: value for name, value in query.items() if value},
        params=dict(route_params),
    )
    if body:
        http.body.CopyFrom(rpc.TypedData(bytes=body))
    metadata: dict[str, rpc.TypedData] = {}
    if body:
        metadata.update(_json_body_properties(body.decode("utf-8", errors="replace")))
    metadata.update({name: rpc.TypedData(string=value) for name, value in query.items() if name != "code"})
    metadata.update({name: rpc.TypedData(string=value) for name, value in route_params.items()})
    metadata["Query"] = _json(dict(query))
    metadata["Headers"] = _json(joined)
    return rpc.TypedData(http=http), metadata


def _joined_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """A header sent more than once, as one value: Kestrel gathers the repeats (names compared
    without case) into one StringValues, and the host hands the worker ``pair.Value.ToString()``
    (azure-functions-host ``ToRpcHttp``), which joins them with commas. So two Authorization
    headers reach the app as one "Bearer a,Bearer b", never as just the last one. ``headers`` is
    aiohttp's multidict, whose ``items()`` yields every repeat."""
    joined: dict[str, str] = {}
    names: dict[str, str] = {}  # lower-cased name -> the name as first sent
    for name, value in headers.items():
        first = names.setdefault(name.lower(), name)
        joined[first] = f"{joined[first]},{value}" if first in joined else value
    return joined


def _body_bytes(data: rpc.TypedData) -> bytes:
    kind = data.WhichOneof("data")
    if kind == "bytes":
        return data.bytes
    if kind in ("string", "json"):
        return str(getattr(data, kind)).encode()
    if kind in ("int", "double"):
        return str(getattr(data, kind)).encode()
    return b""


def http_reply(response: rpc.InvocationResponse) -> HttpReply:
    """The ``$return`` http binding as the host turns it into a response; none is a plain 200."""
    returned = response.return_value
    kind = returned.WhichOneof("data")
    if kind is None:
        return HttpReply(200, {}, b"")
    if kind != "http":
        return HttpReply(200, {}, _body_bytes(returned))
    http = returned.http
    headers = dict(http.headers)
    cookies = [f"{c.name}={c.value}" for c in http.cookies]
    if cookies:
        headers["Set-Cookie"] = ", ".join(cookies)
    status = int(http.status_code) if http.status_code.isdigit() else 200
    return HttpReply(status, headers, _body_bytes(http.body))


# --- Service Bus --------------------------------------------------------------------------------


# A trigger's ``dataType`` (function.json, or the decorator's ``data_type``), as the host reads it
# (azure-functions-host ``GeneralScriptBindingProvider.ParseDataType``: case-insensitive).
BINARY = "binary"
STRING = "string"
SERVICEBUS_DATA_TYPES = frozenset({BINARY, STRING})


def servicebus_data_type(trigger: Mapping[str, Any]) -> str:
    """What a Service Bus trigger gets its body as: ``binary`` asks for bytes; ``string`` or no
    ``dataType`` gets text. With none the host asks the extension for ``object``, and as the
    extension registers its trigger with no binding rules, the WebJobs SDK falls back to
    ``string`` (``JobHostMetadataProvider.GetDefaultType``: "common default")."""
    declared = trigger.get("dataType")
    return str(declared).lower() if declared else STRING


def servicebus_text(body: bytes) -> str:
    """The body as the extension's ``MessageToStringConverter`` makes a string of it: strict UTF-8,
    and failing that never an error but ``BinaryData.ToString()``, .NET's UTF-8 with U+FFFD for
    each invalid sequence (as Python's ``errors="replace"``, both by Unicode's maximal subparts).
    Not played: its middle try, a body written by .NET's DataContract serializer, which no sender
    of this project's uses."""
    return body.decode("utf-8", errors="replace")


def servicebus_message(
    message: ReceivedMessage, data_type: str = STRING
) -> tuple[rpc.TypedData, dict[str, rpc.TypedData]]:
    """One peek-locked message as the Service Bus extension (5.x) binds it for a worker: the body
    as bytes for ``dataType`` binary (``MessageToByteArrayConverter``), else as text
    (``servicebus_text``: never a binding failure, a lossy one); the message's properties as
    trigger metadata (unset ones left out), numbers and dates as JSON, the settlement objects as
    the empty JSON they serialise to. Then, for text only, a JSON body's top-level properties over
    all of those, as the Functions host binds them (``Utility.ApplyBindingData`` reads a string
    and nothing else), so such a body can set what the function reads as ``DeliveryCount``."""
    metadata: dict[str, rpc.TypedData] = {}
    metadata.update(
        {
            "MessageId": rpc.TypedData(string=message.message_id),
            "LockToken": rpc.TypedData(string=message.lock_token),
            "DeliveryCount": _json(message.delivery_count),
            "SequenceNumber": _json(message.sequence_number),
            "EnqueuedTimeUtc": _json(_net_time(message.enqueued_time)),
            "EnqueuedTime": _json(_net_time(message.enqueued_time, "+00:00")),
            "ApplicationProperties": _json(message.application_properties),
            "UserProperties": _json(message.application_properties),
        }
    )
    for key in ("MessageActions", "MessageReceiver", "MessageSession", "SessionActions", "ReceiveActions"):
        metadata[key] = _json({})
    optional = {
        "CorrelationId": message.correlation_id,
        "ContentType": message.content_type,
        "Subject": message.subject,
        "Label": message.subject,
        "ReplyTo": message.reply_to,
    }
    metadata.update(
        {key: rpc.TypedData(string=value) for key, value in optional.items() if value is not None}
    )
    if data_type == BINARY:
        return rpc.TypedData(bytes=message.body), metadata
    text = servicebus_text(message.body)
    # Last, as the host does it (WorkerFunctionInvoker.TransformInput): over the extension's values.
    _bind_over(metadata, _json_body_properties(text))
    return rpc.TypedData(string=text), metadata


# --- Timer --------------------------------------------------------------------------------------


def timer_info(
    *, past_due: bool, last: datetime, next_: datetime, now: datetime, monitored: bool
) -> tuple[rpc.TypedData, dict[str, rpc.TypedData]]:
    """The TimerInfo the timer extension serialises; with ``useMonitor`` off it keeps no schedule
    status, and the status is null."""
    status = (
        {
            "Last": _net_time(last, "+00:00"),
            "Next": _net_time(next_, "+00:00"),
            "LastUpdated": _net_time(now, "+00:00"),
        }
        if monitored
        else None
    )
    info = {"Schedule": {"AdjustForDST": True}, "ScheduleStatus": status, "IsPastDue": past_due}
    metadata = {"TimerTrigger": rpc.TypedData(string=now.astimezone(UTC).strftime("%m/%d/%Y %H:%M:%S"))}
    return _json(info), metadata


# --- Durable Functions (out-of-proc) --------------------------------------------------------------


def orchestration_context(
    param: str, context_json: str, fields: dict[str, Any]
) -> tuple[rpc.TypedData, dict[str, rpc.TypedData]]:
    """The out-of-proc context as text, also bound under the parameter's name, plus its other
    properties (``fields``: the context but its history, which as an array is not bound)."""
    metadata = _properties(fields)
    metadata[param] = rpc.TypedData(string=context_json)
    return rpc.TypedData(string=context_json), metadata


def activity_input(
    param: str, instance_id: str, input_json: str | None
) -> tuple[rpc.TypedData, dict[str, rpc.TypedData]]:
    """The activity's input as the Durable extension binds it to a string parameter.

    The Python SDK sends each action's input as JSON text (``df_dumps``), which the extension's
    ``OutOfProcOrchestrationShim`` reads as a .NET string and schedules as that string; the
    activity's ``DurableActivityContext.GetInput(typeof(string))`` gives the same string back,
    so the worker receives the SDK's text verbatim: ``"null"`` for no input, ``"\"123\""``
    for the string "123" (which the worker's ``df_loads`` decodes as the string again). Only an
    action with no input at all is bound as nothing, as the host sends a null.
    """
    value = None if input_json is None else json.loads(input_json)
    data = rpc.TypedData() if input_json is None else rpc.TypedData(string=input_json)
    metadata = _properties(value)
    metadata.update({"instanceId": rpc.TypedData(string=instance_id), "data": _json(value)})
    if data.WhichOneof("data") is not None:
        metadata[param] = data
    return data, metadata


def durable_client(client_json: str) -> rpc.TypedData:
    return rpc.TypedData(string=client_json)


def returned_json(response: rpc.InvocationResponse) -> str | None:
    """The ``$return`` value as JSON text: what the Durable extension stores as a result."""
    returned = response.return_value
    kind = returned.WhichOneof("data")
    if kind is None:
        return None
    if kind == "json":
        return returned.json
    value: Any = getattr(returned, kind)
    if kind == "bytes":
        value = value.decode()
    return json.dumps(value)
