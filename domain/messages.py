"""Message contracts (R2, E2, E9, E16), validated at every boundary.

A message that fails validation is dead-lettered with the reason these models give; nothing
here retries. Field names follow the state record's PascalCase so one vocabulary runs from
the queue to the store.
"""

import hashlib
import json
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StrictInt,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from domain.apps import APP_NAME
from domain.ids import (
    INSTANCE_ID_PATTERN,
    LEGACY_REQUEST_ID_PATTERN,
    ORDER_ID_PATTERN,
    is_request_id,
    request_action,
)
from domain.states import OrderStatus

# Service Bus standard tier caps a message at 256 KB; stay well inside it.
MAX_MESSAGE_BYTES = 64 * 1024

OrderId = Annotated[str, StringConstraints(pattern=ORDER_ID_PATTERN.pattern)]
QueueName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]{0,49}$")]
StepName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9]{0,63}$")]
AppName = Annotated[str, StringConstraints(pattern=APP_NAME.pattern)]
# Free text a person reads and a database stores: no control characters (C0, DEL, C1).
ShortText = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=200, strip_whitespace=True, pattern=r"^[^\x00-\x1f\x7f-\x9f]+$"
    ),
]
CENT = Decimal("0.01")


def _number_not_text(value: object) -> object:
    # pydantic reads a Decimal from a JSON string even in strict mode; a submitter's "10.00" in
    # quotes is a type error here, like "2" for a quantity. A JSON number arrives as a float:
    # its shortest repr is the decimal that was written, so no binary noise gets in.
    if isinstance(value, bool | str):
        raise ValueError("an amount is a JSON number, not a string or a boolean")
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, int):
        return Decimal(value)
    return value


# A JSON number with at most two decimals, kept as an exact Decimal (never a float) and written
# with exactly two everywhere after the front door ("10" and "10.00" are the same amount).
Money = Annotated[
    Decimal,
    BeforeValidator(_number_not_text),
    Field(ge=0, le=Decimal("1000000000"), decimal_places=2),
    AfterValidator(lambda amount: amount.quantize(CENT)),
    # Written back as a JSON number too (pydantic writes a Decimal as a string by default); a
    # float holds every amount up to the maximum to the cent, and parsing quantizes it again.
    PlainSerializer(float, return_type=float, when_used="json"),
    WithJsonSchema(
        {
            "type": "number",
            "minimum": 0,
            "maximum": 1000000000,
            "description": "An amount with at most two decimals (a JSON number, not a string).",
        }
    ),
]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=4000)


class _Submitted(_Message):
    # Strict: what a submitter sends is taken as sent, never coerced ("2" is not a quantity).
    model_config = ConfigDict(strict=True)


class OrderLine(_Submitted):
    Sku: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")]
    Quantity: StrictInt = Field(ge=1, le=10_000)
    UnitPrice: Money


class OrderSubmission(_Submitted):
    """What a submitting app posts to the front end (E1); ``docs/order.schema.json`` is its schema.

    ``StatusQueue`` may be left out: the caller's identity decides it. A submission that names
    one names its own, or it is refused.
    """

    model_config = ConfigDict(
        title="Order",
        json_schema_extra={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "description": (
                "An order as a submitting app posts it to POST /api/orders. The caller's identity "
                "decides where its statuses go; a StatusQueue, if given, must be the caller's own. "
                "Total must equal the sum of Quantity x UnitPrice over the lines."
            ),
        },
    )

    OrderID: OrderId
    Customer: ShortText
    Lines: list[OrderLine] = Field(min_length=1, max_length=100)
    Total: Money
    StatusQueue: QueueName | None = None
    SubmittedAt: AwareDatetime

    @model_validator(mode="after")
    def _total_matches_lines(self) -> "OrderSubmission":
        expected = sum((line.UnitPrice * line.Quantity for line in self.Lines), Decimal(0))
        if expected != self.Total:
            raise ValueError(f"Total {self.Total} does not equal the sum of the lines {expected}")
        return self


class QueuedOrder(OrderSubmission):
    """What the front end puts on the orders queue: the order and the authenticated app that
    submitted it. Only the front end can send to that queue (RBAC), so ``SubmittedBy`` is the
    caller's identity, not a claim of the caller's."""

    model_config = ConfigDict(title="QueuedOrder", json_schema_extra=None)

    SubmittedBy: AppName

    @property
    def status_queue(self) -> str:
        return f"status-{self.SubmittedBy}"

    def immutable_data(self) -> dict[str, Any]:
        """The part of an order that a repeat of the same submission must not change.

        SubmittedAt is left out on purpose: a client that re-sends an order stamps it anew.
        """
        return {
            "OrderID": self.OrderID,
            "Customer": self.Customer,
            "Lines": [
                {"Sku": line.Sku, "Quantity": line.Quantity, "UnitPrice": str(line.UnitPrice)}
                for line in self.Lines
            ],
            "Total": str(self.Total),
            "SubmittedBy": self.SubmittedBy,
        }

    def order_hash(self) -> str:
        """sha256 of the canonical JSON of the immutable data (C6, E2)."""
        canonical = json.dumps(self.immutable_data(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def message_id(self) -> str:
        """The orders queue's MessageId: the same order again is a duplicate the broker may drop;
        different data under the same OrderID is a different message, so it reaches the
        submission function and is refused there as a conflict, never dropped by the broker."""
        return f"{self.OrderID}.{self.order_hash()[:32]}"


def _request_id(value: str) -> str:
    if not is_request_id(value):
        raise ValueError(
            "RequestID must be '<action>:<32 hex digits>' (or, sent before nonces, '<InstanceID>:<action>')"
        )
    return value


# "<OrderID>-<attempt>": the listener reads the order from it, and puts it in a URL.
InstanceId = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=INSTANCE_ID_PATTERN.pattern)
]
RequestId = Annotated[str, StringConstraints(min_length=1, max_length=128), AfterValidator(_request_id)]


class AgentRequest(_Message):
    """Scheduler → Agent (R2): the work, its deadline and its share of the retry budget."""

    RequestID: RequestId
    InstanceID: InstanceId
    OrderID: OrderId
    Step: StepName
    IdempotencyKey: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    Payload: dict[str, Any] = Field(default_factory=dict)
    CompleteBy: AwareDatetime
    MaxAttempts: int = Field(ge=1, le=100)


class AgentOutcome(StrEnum):
    OK = "ok"
    TRANSIENT_EXHAUSTED = "transient-exhausted"
    PERMANENT = "permanent"


class AgentReply(_Message):
    """Agent → Scheduler (E9): raised on the instance as the event its RequestID names
    (``domain.ids.reply_event``). The Agent echoes the request's IDs; one that is not a request
    ID, or names another action or instance than the reply does, is refused here, so the
    listener dead-letters it instead of raising it."""

    RequestID: RequestId
    InstanceID: InstanceId
    Step: StepName
    Outcome: AgentOutcome
    Result: dict[str, Any] | None = None
    Error: Annotated[str, StringConstraints(max_length=2000)] | None = None
    Attempts: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _error_iff_not_ok(self) -> "AgentReply":
        if (self.Outcome is AgentOutcome.OK) == (self.Error is not None):
            raise ValueError("Error must be set exactly when Outcome is not 'ok'")
        return self

    @model_validator(mode="after")
    def _ids_agree(self) -> "AgentReply":
        if request_action(self.RequestID) != self.Step:
            raise ValueError(f"RequestID names another action than Step {self.Step!r}")
        legacy = LEGACY_REQUEST_ID_PATTERN.fullmatch(self.RequestID)
        if legacy is not None and legacy.group(1) != self.InstanceID:
            raise ValueError("RequestID names another instance than InstanceID")
        return self


class StatusMessage(_Message):
    """Scheduler → the submitting app's own status queue (E16)."""

    OrderID: OrderId
    Status: OrderStatus
    At: AwareDatetime
    Detail: Annotated[str, StringConstraints(max_length=2000)] | None = None


class OperatorAlert(_Message):
    """Something a person must look at (E2, E12, E15, C11). ``Event`` is stable: alert rules match it."""

    Event: Literal[
        "SubmissionRejected",
        "MessageRejected",
        "OrderFailed",
        "RecoveryGaveUp",
        "CompensationFailed",
        "OrderCompensated",
        "DependencyUnavailable",
        "DependencyRecovered",
    ]
    OrderID: str | None = None
    Reason: Annotated[str, StringConstraints(max_length=2000)]
    At: AwareDatetime


# Service Bus takes a dead-letter reason or description of at most 4096 characters
# (adapters/servicebus/limits.py cites Microsoft's SDKs): one that quotes a hostile body's keys or
# an exception's text is cut well inside that, and still says what was wrong first.
DESCRIPTION_CHARS = 1024


def clipped(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


class InvalidMessage(ValueError):
    """A message body that is not a valid contract; ``reason`` goes into the dead-letter reason."""

    def __init__(self, reason: str, description: str) -> None:
        super().__init__(f"{reason}: {description}")
        self.reason = reason
        self.description = clipped(description)


M = TypeVar("M", bound=BaseModel)


def parse_message[M: BaseModel](model: type[M], body: bytes | str) -> M:
    """Parse and validate a message body, or raise ``InvalidMessage`` with a dead-letter reason."""
    raw = body.encode() if isinstance(body, str) else body
    if len(raw) > MAX_MESSAGE_BYTES:
        raise InvalidMessage("MessageTooLarge", f"{len(raw)} bytes > {MAX_MESSAGE_BYTES}")
    try:
        # Said as such, not as the JSON parser's "invalid unicode code point": the sender wrote
        # another encoding, and an operator looking at the dead letter needs to know which byte.
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidMessage(
            "InvalidEncoding",
            f"the body is not UTF-8 JSON: byte 0x{raw[error.start]:02x} at offset {error.start} "
            f"({error.reason})",
        ) from None
    try:
        return model.model_validate_json(raw)
    except ValidationError as error:
        details = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<body>'}: {e['msg']}" for e in error.errors()[:10]
        )
        raise InvalidMessage("InvalidSchema", f"{model.__name__}: {details}") from None
