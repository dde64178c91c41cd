"""The orchestrator↔activity contract: what each activity is called by, takes and returns.

Pydantic models, not frozen dataclasses: the wire form is JSON with PascalCase keys where some
keys are left out and others are an explicit null, and pydantic parses it (validating the
types, enums and timestamps on the way in) and writes it back exactly as it came with one
``model_dump(mode="json", exclude_unset=True)``. Dataclasses would need a hand-written reader and
writer per class to do the same, and would check nothing. Field names keep the JSON's
PascalCase, as ``domain.messages`` does, so no aliases sit between the code and the wire.

What crosses the Durable boundary stays a plain JSON object, byte for byte what it was when these
were TypedDicts, so that in-flight instances replay: the orchestrator sends ``model.wire()`` and
parses what comes back (``ActivityContract.read_result``); an activity parses its input
(``ActivityContract.takes``) and returns ``result.wire()`` (``activities.functions``). A model
object is never handed to the Durable SDK, which would wrap it in ``__class__``/``__data__``.
``wire()`` leaves out every field that was not set, so a key absent before stays absent, and a
None set on purpose (``FinishInput.Error``) stays a null.

``JsonObject`` is what ``function_app.py`` annotates the activity functions with. The Functions
Python worker checks those annotations when it indexes the app: it accepts a class, and refuses
a parametrised ``dict[str, Any]`` as a "non-type annotation" (the app would not start). It hands
the activity a plain ``dict`` whatever the annotation says; the models validate that dict.
"""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    model_validator,
)

from contracts.names import Activity
from domain import workflow
from domain.messages import AgentReply
from domain.states import ProcessState


class JsonObject(dict[str, Any]):
    """A JSON object as it crosses the Durable boundary, as an annotation the worker accepts: an
    activity is handed a plain dict, and returns one of these (``json.dumps`` writes it as the
    dict it is; it has no ``to_json`` for the Durable SDK to wrap)."""


def _from_iso(value: object) -> object:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


# A moment as ``datetime.isoformat`` writes it ("+00:00", not pydantic's "Z"): read and written
# back unchanged.
IsoTime = Annotated[
    AwareDatetime, BeforeValidator(_from_iso), PlainSerializer(datetime.isoformat, return_type=str)
]


class Contract(BaseModel):
    """An activity's input or result. Unknown keys are ignored: an activity repeated from an
    older history, or called by hand, may carry more than it needs."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    def wire(self) -> dict[str, Any]:
        """The JSON object for the Durable boundary: the fields that were set, in field order."""
        return self.model_dump(mode="json", exclude_unset=True)


class FinishOutcome(StrEnum):
    """How ``finish`` moves the record (the terminal moves of an attempt)."""

    COMPLETE = "complete"
    # A permanent failure: the order fails, or turns to compensation when anything logged may
    # need undoing (R9); ``finish`` decides from the compensation log.
    FAIL = "fail"
    BEGIN_COMPENSATION = "begin_compensation"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"


# --- Data the inputs and results carry ---------------------------------------------------------


class OrderLineSnapshot(Contract):
    Sku: str
    Quantity: int
    UnitPrice: str


class OrderSnapshot(Contract):
    """The order as an attempt read it from the orders database (amounts as decimal text)."""

    OrderID: str
    Customer: str
    Total: str
    Lines: list[OrderLineSnapshot]


class Compensation(Contract):
    """A step still to undo: its compensating action and the references it needs (R9, C5)."""

    Step: str
    Action: str
    Data: dict[str, str]


class PendingRequest(Contract):
    """A request sent to the Agent: wait for its reply until ``CompleteBy``."""

    RequestID: str
    CompleteBy: IsoTime
    Step: str
    Action: str


# --- Inputs ------------------------------------------------------------------------------------


class OrchestratorInput(Contract):
    """What an attempt's orchestration is started with (``services.scheduling``).

    ``Salt``: the attempt's secret, from which its request nonces are made
    (``domain.ids.request_nonce``). It lives only in the orchestration's own history, which no
    sender to the reply queue can read. Instances started before it have none."""

    OrderID: str
    Salt: str | None = None


class AttemptInput(Contract):
    """Every activity's input names the order and the attempt (instance) acting on it (E5)."""

    OrderID: str
    InstanceID: str

    # The builders below set every field they name, so ``wire()`` writes each (None as a null).
    def for_step(self, step: str, action: str) -> "StepInput":
        return StepInput(OrderID=self.OrderID, InstanceID=self.InstanceID, Step=step, Action=action)

    def finishing(self, outcome: FinishOutcome, error: str | None = None) -> "FinishInput":
        return FinishInput(OrderID=self.OrderID, InstanceID=self.InstanceID, Outcome=outcome, Error=error)

    def answering(self, request: PendingRequest, reply: AgentReply, nonce: str | None) -> "AdvanceInput":
        fields: dict[str, Any] = {"Step": request.Step, "Action": request.Action, "Reply": reply}
        if nonce is not None:  # left out, not null, without one: the wire stays as it was
            fields["Nonce"] = nonce
        return AdvanceInput(OrderID=self.OrderID, InstanceID=self.InstanceID, **fields)

    def starting(self, nonce: str) -> "AdvanceInput":
        return AdvanceInput(OrderID=self.OrderID, InstanceID=self.InstanceID, Nonce=nonce)


class StepInput(AttemptInput):
    Step: str
    Action: str

    def requesting(
        self, complete_by: datetime, max_attempts: int, payload: dict[str, Any], nonce: str | None = None
    ) -> "AgentRequestInput":
        fields: dict[str, Any] = {"CompleteBy": complete_by, "MaxAttempts": max_attempts, "Payload": payload}
        if nonce is not None:  # left out, not null, without one: the wire stays as it was
            fields["Nonce"] = nonce
        return AgentRequestInput(
            OrderID=self.OrderID, InstanceID=self.InstanceID, Step=self.Step, Action=self.Action, **fields
        )

    def recording(self, result: dict[str, Any]) -> "RecordStepInput":
        return RecordStepInput(
            OrderID=self.OrderID,
            InstanceID=self.InstanceID,
            Step=self.Step,
            Action=self.Action,
            Result=result,
        )

    def running_locally(self, order: dict[str, Any]) -> "LocalStepInput":
        return LocalStepInput(
            OrderID=self.OrderID, InstanceID=self.InstanceID, Step=self.Step, Action=self.Action, Order=order
        )


class AgentRequestInput(StepInput):
    CompleteBy: IsoTime
    MaxAttempts: int
    Payload: dict[str, Any] = Field(default_factory=dict)
    # The request's nonce (its RequestID names it); None: a legacy "<instance>:<action>" ID.
    Nonce: str | None = None


class RecordStepInput(StepInput):
    Result: dict[str, Any] | None = None  # the Agent's result: its references are logged (R9)


class LocalStepInput(RecordStepInput):
    """A local step records itself when done, with no remote result."""

    Order: dict[str, Any] = Field(default_factory=dict)  # what the step is given


class FinishInput(AttemptInput):
    Outcome: FinishOutcome
    Error: str | None = None


class AdvanceInput(AttemptInput):
    """Where the orchestrator stands: at the start (no ``Step``), or with the reply to the
    request it waited on (``Step``, ``Action``, ``Reply``: the reply as the Agent sent it).

    ``Nonce``: for the request this call sends, if it sends one, made by the orchestration
    (replay-safe), so that a repeat of this call sends the very same request. None: a call
    scheduled before nonces, whose request keeps the legacy ID."""

    Step: str | None = None
    Action: str | None = None
    Reply: AgentReply | None = None
    Nonce: str | None = None

    @model_validator(mode="after")
    def _a_reply_answers_a_step(self) -> Self:
        if (self.Reply is None) != (self.Step is None) or (self.Step is None) != (self.Action is None):
            raise ValueError("Step, Action and Reply are given together or not at all")
        return self

    def answered(self) -> tuple[StepInput, AgentReply] | None:
        """The step the reply answers, and the reply; None at the start."""
        if self.Reply is None or self.Step is None or self.Action is None:
            return None
        return self.for_step(self.Step, self.Action), self.Reply


# --- Results -----------------------------------------------------------------------------------


class FencedResult(Contract):
    """``Fenced``: a newer attempt owns the record; this one stops without writing (E5)."""

    Fenced: bool


class ReadOrderResult(FencedResult):
    Missing: bool = False
    Compensating: bool = False
    CompletedSteps: list[str] = Field(default_factory=list)
    ToCompensate: list[Compensation] = Field(default_factory=list)
    Order: OrderSnapshot | None = None


class BeginStepResult(FencedResult):
    Exhausted: bool = False  # the retry budget is spent: a permanent failure (C2)
    Error: str | None = None
    CompleteBy: IsoTime | None = None
    CallsGranted: int | None = None

    def grant(self) -> tuple[datetime, int]:
        """The step's ``CompleteBy`` and the calls each delivery of its request may make."""
        if self.CompleteBy is None or self.CallsGranted is None:
            raise ValueError("the step did not begin: no CompleteBy or CallsGranted")
        return self.CompleteBy, self.CallsGranted


class LocalStepResult(FencedResult):
    Error: str | None = None  # the step failed for good


class FinishResult(FencedResult):
    State: ProcessState | None = None
    ToCompensate: list[Compensation] = Field(default_factory=list)  # when now Compensating


class AdvanceResult(Contract):
    """Either ``Wait`` (a request is out) or ``Ending`` (the attempt is over)."""

    Wait: PendingRequest | None = None
    Ending: workflow.Ending | None = None

    @model_validator(mode="after")
    def _wait_or_ending(self) -> Self:
        if (self.Wait is None) == (self.Ending is None):
            raise ValueError("exactly one of Wait and Ending")
        return self


# --- The activities ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ActivityContract[I: AttemptInput, R]:
    """An activity as both sides see it: the name it is registered and called by, the input it
    takes and the result it returns. The orchestrators call ``call(context, ADVANCE, ...)``;
    ``activities.functions`` binds each to its body, which must take ``I`` and return ``R``."""

    name: Activity
    takes: type[I]
    returns: type[R]

    @cached_property
    def _returns(self) -> TypeAdapter[R]:
        return TypeAdapter(self.returns)

    def read_result(self, result: Any) -> R:
        """The activity's JSON result, as the orchestrator reads it."""
        return self._returns.validate_python(result)


ADVANCE = ActivityContract(Activity.ADVANCE, AdvanceInput, AdvanceResult)
# The first engine's.
READ_ORDER = ActivityContract(Activity.READ_ORDER, AttemptInput, ReadOrderResult)
BEGIN_STEP = ActivityContract(Activity.BEGIN_STEP, StepInput, BeginStepResult)
SEND_AGENT_REQUEST = ActivityContract(Activity.SEND_AGENT_REQUEST, AgentRequestInput, str)  # the RequestID
RECORD_STEP = ActivityContract(Activity.RECORD_STEP, RecordStepInput, FencedResult)
RUN_LOCAL_STEP = ActivityContract(Activity.RUN_LOCAL_STEP, LocalStepInput, LocalStepResult)
FINISH = ActivityContract(Activity.FINISH, FinishInput, FinishResult)
