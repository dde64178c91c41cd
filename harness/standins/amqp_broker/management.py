"""Request/response nodes: ``$cbs`` (token put) and ``<entity>/$management``.

Both answer with the request's message-id as correlation-id and a status in the application
properties; the SDK matches replies to requests by that id. CBS uses ``status-code``, the
management node ``statusCode`` (and ``errorCondition`` when it fails), as Service Bus does.
"""

import uuid
from collections.abc import Callable
from typing import Any

from proton import UNDESCRIBED, Array, Data, Message, symbol

from harness.standins.amqp_broker import codec
from harness.standins.amqp_broker.store import BrokerError, Store, check_properties, check_size

_DISPOSITION_COMPLETED = "completed"
_DISPOSITION_ABANDONED = "abandoned"
_DISPOSITION_SUSPENDED = "suspended"  # dead-letter


def cbs_reply(request: Message) -> Message:
    """Every token is good: the broker serves loopback tests.

    Service Bus refuses a token for an unknown entity with 404, but the SDK turns that into a
    retried ``ServiceBusAuthenticationError``; the broker reports unknown entities on the link
    instead, which the SDK raises at once as ``MessagingEntityNotFoundError``.
    """
    return Message(correlation_id=request.id, properties={"status-code": 200, "status-description": "OK"})


def management_reply(store: Store, entity: str, request: Message, now: float) -> Message:
    properties: dict[Any, Any] = dict(request.properties or {})
    operation = str(properties.get("operation", ""))
    handler = _OPERATIONS.get(operation)
    try:
        if handler is None:
            raise BrokerError("amqp:not-implemented", f"the test broker does not implement {operation!r}")
        if not isinstance(request.body, dict):
            raise BrokerError("amqp:decode-error", f"{operation}: the request body must be a map")
        status, body = handler(store, entity, request.body, now)
    except BrokerError as error:
        status_code = {"amqp:not-found": 404, "com.microsoft:message-lock-lost": 410}.get(
            error.condition, 400
        )
        return Message(
            correlation_id=request.id,
            properties={
                "statusCode": status_code,
                "statusDescription": error.description,
                "errorCondition": symbol(error.condition),
            },
        )
    return Message(
        correlation_id=request.id,
        properties={"statusCode": status, "statusDescription": "OK" if status == 200 else "No Content"},
        body=body,
    )


_Result = tuple[int, dict[str, Any] | None]


def _array(element_type: int, values: list[Any]) -> Array:
    # Proton's annotations say a descriptor is AMQP data; UNDESCRIBED is its documented marker.
    return Array(UNDESCRIBED, element_type, *values)  # type: ignore[arg-type]


def _lock_tokens(body: dict[str, Any]) -> list[uuid.UUID]:
    tokens = body.get("lock-tokens")
    elements = tokens.elements if isinstance(tokens, Array) else tokens or []
    return [t if isinstance(t, uuid.UUID) else uuid.UUID(str(t)) for t in elements]


def _renew_lock(store: Store, entity: str, body: dict[str, Any], now: float) -> _Result:
    expirations = [codec.ms(store.renew(entity, token, now)) for token in _lock_tokens(body)]
    return 200, {"expirations": _array(Data.TIMESTAMP, expirations)}


def _peek(store: Store, entity: str, body: dict[str, Any], now: float) -> _Result:
    start = int(body.get("from-sequence-number", 1))
    messages = store.peek(entity, start, int(body.get("message-count", 1)))
    if not messages:
        return 204, None
    return 200, {"messages": [{"message": wire} for wire in messages]}


def _update_disposition(store: Store, entity: str, body: dict[str, Any], now: float) -> _Result:
    status = str(body.get("disposition-status", ""))
    for token in _lock_tokens(body):
        if status == _DISPOSITION_COMPLETED:
            store.complete(entity, token, now)
        elif status == _DISPOSITION_ABANDONED:
            store.abandon(entity, token, now)
        elif status == _DISPOSITION_SUSPENDED:
            reason = str(body.get("deadletter-reason") or "")
            description = str(body.get("deadletter-description") or "")
            store.dead_letter(entity, token, reason, description, now)
        else:
            raise BrokerError("amqp:not-implemented", f"disposition {status!r} (defer) is not supported")
    return 200, {}


def _schedule(store: Store, entity: str, body: dict[str, Any], now: float) -> _Result:
    messages = [bytes(item["message"]) for item in body.get("messages", [])]
    for message in messages:  # all or none: a message over the limit schedules nothing
        check_size(message)
        check_properties(message)
    numbers = []
    for message in messages:
        number = store.send(entity, message, now)
        # A duplicate is dropped; Service Bus still answers, so the sender cannot tell.
        numbers.append(number if number is not None else 0)
    return 200, {"sequence-numbers": _array(Data.LONG, numbers)}


def _cancel_scheduled(store: Store, entity: str, body: dict[str, Any], now: float) -> _Result:
    numbers = body.get("sequence-numbers")
    elements = numbers.elements if isinstance(numbers, Array) else numbers or []
    store.cancel_scheduled(entity, [int(n) for n in elements])
    return 200, {}


_OPERATIONS: dict[str, Callable[[Store, str, dict[str, Any], float], _Result]] = {
    "com.microsoft:renew-lock": _renew_lock,
    "com.microsoft:peek-message": _peek,
    "com.microsoft:update-disposition": _update_disposition,
    "com.microsoft:schedule-message": _schedule,
    "com.microsoft:cancel-scheduled-message": _cancel_scheduled,
}
