"""Identifiers derived from the OrderID (R3, E4, E9), and the alphabets every ID is checked against.

OrderIDs end up in Durable instance IDs (which may not contain ``/ \\ # ?`` or control
characters), in Service Bus MessageIds and in idempotency keys joined with ``:``, so the
allowed alphabet is deliberately narrow. An ID that arrives in a message is checked against its
pattern before it is used anywhere, and before it is placed in a URL (``url_segment``).
"""

import hashlib
import re
from urllib.parse import quote

from domain.errors import InvalidOrderId

ORDER_ID_MAX_LENGTH = 64
_ORDER_ID = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
ORDER_ID_PATTERN = re.compile(rf"^{_ORDER_ID}$")
# "<OrderID>-<attempt>": the attempt follows the last "-" (an OrderID may hold "-" itself).
_INSTANCE_ID = rf"{_ORDER_ID}-[0-9]{{1,9}}"
INSTANCE_ID_PATTERN = re.compile(rf"^{_INSTANCE_ID}$")
_STEP = r"[A-Za-z][A-Za-z0-9]{0,63}"
STEP_PATTERN = re.compile(rf"^{_STEP}$")
# 128 bits as lowercase hex: what ``request_nonce`` makes.
_NONCE = r"[0-9a-f]{32}"
NONCE_PATTERN = re.compile(rf"^{_NONCE}$")
# A request of this deployment: "<action>:<nonce>". The action never holds "-", an instance ID
# always does, so no request ID matches both this and the legacy pattern.
REQUEST_ID_PATTERN = re.compile(rf"^({_STEP}):({_NONCE})$")
# A request sent before nonces, "<instance>:<action>": still answered, for the instances that
# wait on one (see ``reply_event``).
LEGACY_REQUEST_ID_PATTERN = re.compile(rf"^({_INSTANCE_ID}):({_STEP})$")
REPLY_EVENT_PREFIX = "AgentReply."
# What ``reply_event`` makes from either kind of request ID: ".", letters, digits, "-" and "_".
EVENT_NAME_PATTERN = re.compile(
    rf"^{re.escape(REPLY_EVENT_PREFIX)}(?:{_STEP}\.{_NONCE}|{_INSTANCE_ID}\.{_STEP})$"
)


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
    """``instance_id``'s inverse: the OrderID and the attempt number. Anything else, such as
    ``o-1-1/terminate?x=-1`` (digits after its last ``-`` too), is refused."""
    if not isinstance(instance, str) or not INSTANCE_ID_PATTERN.fullmatch(instance):
        raise ValueError(f"not an attempt's instance ID: {instance!r:.80}")
    order_id, _, attempt = instance.rpartition("-")
    return order_id, int(attempt)


def idempotency_key(order_id: str, step: str) -> str:
    """Stable across every attempt and retry of one step, so the remote service de-duplicates (R3)."""
    return f"{order_id}:{step}"


def request_message_id(instance: str, step: str) -> str:
    """Stable across re-sends of one attempt's request, so duplicate detection drops them (E9).
    Until nonces, this was the request ID too: ``LEGACY_REQUEST_ID_PATTERN``."""
    return f"{instance}:{step}"


def request_nonce(seed: str, salt: str | None) -> str:
    """The nonce of one request, from a replay-safe seed the orchestration makes
    (``context.new_uuid()``) and the attempt's secret salt (its orchestration input).

    ``new_uuid`` is a name-based UUID of the instance ID, the episode's timestamp and a counter:
    deterministic on replay, but not secret; the salt is what makes the nonce unguessable. An
    instance started without one (before salts) still gets a nonce nobody can derive from the
    IDs alone."""
    return hashlib.sha256(f"{salt or ''}:{seed}".encode()).hexdigest()[:32]


def request_id(action: str, nonce: str) -> str:
    """The ID of one request: which action, and the nonce only the orchestration knows."""
    if not STEP_PATTERN.fullmatch(action) or not NONCE_PATTERN.fullmatch(nonce):
        raise ValueError(f"not an action and a nonce: {action!r:.80}, {nonce!r:.80}")
    return f"{action}:{nonce}"


def is_request_id(value: str) -> bool:
    """Whether ``value`` is a request ID of either kind."""
    return bool(REQUEST_ID_PATTERN.fullmatch(value) or LEGACY_REQUEST_ID_PATTERN.fullmatch(value))


def request_action(value: str) -> str:
    """The action a request ID names, of either kind; ValueError for anything else."""
    if match := REQUEST_ID_PATTERN.fullmatch(value):
        return match.group(1)
    if match := LEGACY_REQUEST_ID_PATTERN.fullmatch(value):
        return match.group(2)
    raise ValueError(f"not a request ID: {value!r:.80}")


def reply_event(request: str) -> str:
    """The external event the reply to ``request`` is raised as, and the only one its wait
    listens for (E8).

    Injective: neither an action nor a nonce holds ``.`` or ``:``, so the name gives back the
    request ID, and a twin that differs only by ``.`` for ``:`` is not a request ID at all. A
    name is only ever waited for once the request went out, and the nonce in it is known only to
    the orchestration and the Agent it asked, so a reply to anything else is raised under a name
    nothing waits for: inert. (The Durable SDK keeps an unconsumed event per name and hands it
    to a later wait of that name, azure-functions-durable-python#507, which is why a name must
    never be guessable before its wait begins.)

    A legacy request ID keeps the name it always had, so an instance that was waiting on one
    when this deployment came (or a first-engine instance) still gets its reply."""
    if match := REQUEST_ID_PATTERN.fullmatch(request):
        return f"{REPLY_EVENT_PREFIX}{match.group(1)}.{match.group(2)}"
    if LEGACY_REQUEST_ID_PATTERN.fullmatch(request):
        return REPLY_EVENT_PREFIX + request.replace(":", ".")
    raise ValueError(f"not a request ID: {request!r:.80}")


def url_segment(value: str, pattern: re.Pattern[str]) -> str:
    """``value`` as one path segment of a URL: checked against its alphabet, then percent-encoded.

    The Durable client builds ``.../instances/{id}/raiseEvent/{name}`` from what it is given,
    unescaped. For an ID that passes its pattern the encoding changes nothing; it is there so
    that a pattern widened one day cannot let ``/``, ``?`` or ``%`` reach the path."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise ValueError(f"refusing to put {value!r:.80} in a URL: it is not a {pattern.pattern!r}")
    return quote(value, safe="")
