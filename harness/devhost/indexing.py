"""The app's functions as the Functions worker indexed them, and what devhost can host of them.

The worker does the indexing (``harness.devhost.worker``): it imports ``function_app.py``, validates
every function's parameters and annotations and reports each binding as the JSON the host
reads (``raw_bindings``). devhost only checks that it can play the host's part for each trigger
and binding, and resolves ``%SETTING%`` placeholders as the host does. Anything it cannot host
is a start-up error that names the function.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.devhost.bindings import SERVICEBUS_DATA_TYPES, servicebus_data_type
from harness.devhost.settings import resolve
from harness.devhost.worker import LoadedFunction

SUPPORTED_TRIGGERS = frozenset(
    {"httpTrigger", "serviceBusTrigger", "timerTrigger", "orchestrationTrigger", "activityTrigger"}
)
# Non-trigger bindings devhost understands: the Durable client input and the HTTP response.
SUPPORTED_BINDINGS = frozenset({"durableClient", "http"})


class IndexingError(Exception):
    pass


@dataclass(frozen=True)
class FunctionSpec:
    name: str
    function_id: str  # the worker's ID for invocations
    trigger_type: str
    trigger: Mapping[str, Any]  # the trigger binding, %SETTING% placeholders resolved
    bindings: tuple[Mapping[str, Any], ...]

    @property
    def trigger_param(self) -> str:
        return str(self.trigger["name"])

    @property
    def client_param(self) -> str | None:
        for binding in self.bindings:
            if binding["type"] == "durableClient":
                return str(binding["name"])
        return None

    def describe(self) -> str:
        detail = {
            "httpTrigger": lambda t: (
                f"[{','.join(t.get('methods') or ['ANY'])}] /api/{t.get('route') or self.name}"
            ),
            "serviceBusTrigger": lambda t: f"queue {t.get('queueName')}",
            "timerTrigger": lambda t: f"schedule {t.get('schedule')}",
        }.get(self.trigger_type, lambda t: "")(self.trigger)
        return f"{self.name}: {self.trigger_type} {detail}".rstrip()


def index(functions: Sequence[LoadedFunction], env: Mapping[str, str]) -> list[FunctionSpec]:
    """Build the dispatch table from the worker's metadata."""
    specs = []
    for function in functions:
        name = function.name
        bindings = tuple(json.loads(raw) for raw in function.raw_bindings)
        triggers = [b for b in bindings if str(b["type"]).endswith("Trigger")]
        if len(triggers) != 1:
            raise IndexingError(f"function {name}: expected one trigger, found {len(triggers)}")
        trigger_type = str(triggers[0]["type"])
        if trigger_type not in SUPPORTED_TRIGGERS:
            raise IndexingError(
                f"function {name}: devhost does not support the trigger {trigger_type!r} "
                f"(supported: {', '.join(sorted(SUPPORTED_TRIGGERS))})"
            )
        for binding in bindings:
            kind = str(binding["type"])
            if binding is not triggers[0] and kind not in SUPPORTED_BINDINGS:
                raise IndexingError(
                    f"function {name}: devhost does not support the {binding.get('direction', '')} "
                    f"binding {kind!r} named {binding.get('name')!r}"
                )
        trigger = {
            key: resolve(value, env, where=f"function {name}") if isinstance(value, str) else value
            for key, value in triggers[0].items()
        }
        if trigger_type == "serviceBusTrigger":
            data_type = servicebus_data_type(trigger)
            if data_type not in SERVICEBUS_DATA_TYPES:
                raise IndexingError(
                    f"function {name}: devhost binds a Service Bus body as binary or string, "
                    f"not dataType {trigger.get('dataType')!r}"
                )
        specs.append(
            FunctionSpec(
                name=name,
                function_id=function.function_id,
                trigger_type=trigger_type,
                trigger=trigger,
                bindings=bindings,
            )
        )
    return specs
