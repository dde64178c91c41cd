"""What the orchestrator sends each activity and what it gets back, as JSON-shaped TypedDicts.

They are the activities' annotations in ``function_app.py`` too, which the Functions Python
worker checks when it indexes the app: a TypedDict is a class, so the worker accepts it, where a
parametrised ``dict[str, Any]`` is refused as a "non-type annotation" and the app would not
start. Keys keep the JSON's PascalCase: these are wire formats, read by the orchestrator
through the Durable history.
"""

from typing import Any, NotRequired, TypedDict


class OrderLineJson(TypedDict):
    Sku: str
    Quantity: int
    UnitPrice: str


class OrderJson(TypedDict):
    OrderID: str
    Customer: str
    Total: str
    Lines: list[OrderLineJson]


class CompensationJson(TypedDict):
    Step: str
    Action: str
    Data: dict[str, str]


class AttemptInput(TypedDict):
    """Every activity's input names the order and the attempt (instance) acting on it (E5)."""

    OrderID: str
    InstanceID: str


class StepInput(AttemptInput):
    Step: str
    Action: str


class AgentRequestInput(StepInput):
    CompleteBy: str
    MaxAttempts: int
    Payload: dict[str, Any]


class RecordStepInput(StepInput):
    Result: NotRequired[dict[str, Any]]


class LocalStepInput(RecordStepInput):
    """A local step records itself when done, with no remote result."""

    Order: dict[str, Any]


class FinishInput(AttemptInput):
    Outcome: str
    Error: str | None


class FencedResult(TypedDict):
    """``Fenced``: a newer attempt owns the record; this one stops without writing (E5)."""

    Fenced: bool


class ReadOrderResult(FencedResult):
    Missing: NotRequired[bool]
    Compensating: NotRequired[bool]
    CompletedSteps: NotRequired[list[str]]
    ToCompensate: NotRequired[list[CompensationJson]]
    Order: NotRequired[OrderJson]


class BeginStepResult(FencedResult):
    Exhausted: NotRequired[bool]
    Error: NotRequired[str]
    CompleteBy: NotRequired[str]
    CallsGranted: NotRequired[int]


class LocalStepResult(FencedResult):
    Error: NotRequired[str]


class FinishResult(FencedResult):
    State: NotRequired[str]
    ToCompensate: NotRequired[list[CompensationJson]]


class ReplyJson(TypedDict):
    """The Agent's reply as the orchestrator received it (``domain.messages.AgentReply``)."""

    RequestID: str
    Outcome: str
    Result: NotRequired[dict[str, Any] | None]
    Error: NotRequired[str | None]


class AdvanceInput(AttemptInput):
    """Where the orchestrator stands: at the start (no ``Step``), or with the reply to the
    request it waited on (``Step``, ``Action``, ``Reply``)."""

    Step: NotRequired[str]
    Action: NotRequired[str]
    Reply: NotRequired[ReplyJson]


class WaitJson(TypedDict):
    """A request sent to the Agent: wait for its reply until ``CompleteBy``."""

    RequestID: str
    CompleteBy: str
    Step: str
    Action: str


class AdvanceResult(TypedDict):
    """Either ``Wait`` (a request is out) or ``Ending`` (the attempt is over)."""

    Wait: NotRequired[WaitJson]
    Ending: NotRequired[str]
