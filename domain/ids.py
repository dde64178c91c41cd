"""Identifiers derived from the OrderID (R3, E4, E9).

OrderIDs end up in Durable instance IDs (which may not contain ``/ \\ # ?`` or control
characters), in Service Bus MessageIds and in idempotency keys joined with ``:``, so the
allowed alphabet is deliberately narrow.
"""

import re

from domain.errors import InvalidOrderId

ORDER_ID_MAX_LENGTH = 64
ORDER_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def validate_order_id(order_id: str) -> str:
    if not isinstance(order_id, str) or not ORDER_ID_PATTERN.fullmatch(order_id):
        raise InvalidOrderId(
            "OrderID must be 1-64 characters of letters, digits, '-' or '_', "
            f"starting with a letter or digit; got {order_id!r:.80}"
        )
    return order_id


def instance_id(order_id: str, attempt: int) -> str:
    """The attempt-specific orchestration instance ID (E4)."""
    return f"{order_id}-{attempt}"


def parse_instance_id(instance: str) -> tuple[str, int]:
    """``instance_id``'s inverse: the OrderID and the attempt number. An OrderID may hold ``-``;
    the attempt is what follows the last one."""
    order_id, sep, attempt = instance.rpartition("-")
    if not sep or not order_id or not attempt.isdigit():
        raise ValueError(f"not an attempt's instance ID: {instance!r:.80}")
    return order_id, int(attempt)


def idempotency_key(order_id: str, step: str) -> str:
    """Stable across every attempt and retry of one step, so the remote service de-duplicates (R3)."""
    return f"{order_id}:{step}"


def request_message_id(instance: str, step: str) -> str:
    """Stable across re-sends of one attempt's request, so duplicate detection drops them (E9)."""
    return f"{instance}:{step}"
