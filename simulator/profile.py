"""The fault profile: how often, and how, the simulated remote service misbehaves."""

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

Rate = Annotated[float, Field(ge=0.0, le=1.0)]
NonNegative = Annotated[float, Field(ge=0.0)]
Span = tuple[NonNegative, NonNegative]


class FaultProfile(BaseModel):
    """Rates are probabilities per call; windows are seconds since the simulator started."""

    # A misspelt fault must fail loudly, or a test would silently run without it.
    model_config = ConfigDict(extra="forbid", frozen=True)

    transient_rate: Rate = 0.0
    permanent_rate: Rate = 0.0
    lost_response_rate: Rate = 0.0
    latency_ms: Span = (0.0, 0.0)
    hang_rate: Rate = 0.0
    hang_seconds: NonNegative = 30.0
    outage: bool = False
    outage_windows: tuple[Span, ...] = ()
    # A bug, not a fault: repeated keys apply the effect again. Only for showing that the
    # exactly-once judges (tests, make demo) catch a service that is not idempotent.
    broken_idempotency: bool = False
    seed: int | None = None

    @field_validator("latency_ms")
    @classmethod
    def _ordered_latency(cls, value: Span) -> Span:
        if value[0] > value[1]:
            raise ValueError("latency_ms must be [min, max] with min <= max")
        return value

    @field_validator("outage_windows")
    @classmethod
    def _ordered_windows(cls, value: tuple[Span, ...]) -> tuple[Span, ...]:
        if any(start > end for start, end in value):
            raise ValueError("each outage window must be [start_s, end_s] with start_s <= end_s")
        return value

    def merged(self, changes: Mapping[str, object]) -> "FaultProfile":
        """A new profile with ``changes`` over this one, validated as a whole."""
        return FaultProfile.model_validate({**self.model_dump(), **changes})

    def in_outage(self, elapsed_seconds: float) -> bool:
        return self.outage or any(start <= elapsed_seconds < end for start, end in self.outage_windows)

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json")


def load_profile(value: str) -> FaultProfile:
    """``--profile``: inline JSON when it looks like an object, else the path of a JSON file."""
    text = value if value.lstrip().startswith("{") else Path(value).read_text(encoding="utf-8")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("a fault profile must be a JSON object")
    return FaultProfile.model_validate(data)
