"""Indexing: find the app's functions and their bindings, as the Python worker reports them.

The metadata comes from the SDK itself (``FunctionRegister.get_functions()`` and each
function's ``get_function_json()``), so devhost sees exactly what the Functions host sees.
Anything devhost cannot run is a start-up error that names the function.
"""

import importlib
import inspect
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import azure.functions as func

from devhost.settings import resolve

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
    trigger_type: str
    trigger: Mapping[str, Any]  # the trigger binding, %SETTING% placeholders resolved
    bindings: tuple[Mapping[str, Any], ...]
    user_function: Callable[..., Any]
    parameters: tuple[str, ...] = field(default=())

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.user_function)

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


def load_app(app_dir: Path, module_name: str = "function_app") -> func.FunctionRegister:
    """Import the app module and return its single FunctionRegister (FunctionApp / DFApp)."""
    # The app's own packages must resolve from its directory, and a fresh import gives a fresh
    # FunctionRegister: get_functions() may be called only once per register.
    if str(app_dir) in sys.path:
        sys.path.remove(str(app_dir))
    sys.path.insert(0, str(app_dir))
    sys.modules.pop(module_name, None)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name == module_name:
            raise IndexingError(f"no {module_name}.py in {app_dir}") from None
        raise
    registers = [v for v in vars(module).values() if isinstance(v, func.FunctionRegister)]
    if len(registers) != 1:
        raise IndexingError(
            f"{module_name}.py must define exactly one FunctionApp/DFApp at module level;"
            f" found {len(registers)}"
        )
    return registers[0]


def index(register: func.FunctionRegister, env: Mapping[str, str]) -> list[FunctionSpec]:
    """Build the dispatch table. ``get_functions()`` may run only once per app: the SDK says so."""
    specs = []
    for function in register.get_functions():
        name = function.get_function_name() or function.get_user_function().__name__
        bindings = tuple(json.loads(function.get_function_json())["bindings"])
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
        user_function = function.get_user_function()
        parameters = tuple(inspect.signature(user_function).parameters)
        names = {str(b["name"]) for b in bindings} | {"context"}
        unknown = [p for p in parameters if p not in names]
        if unknown:
            raise IndexingError(
                f"function {name}: parameter(s) {', '.join(unknown)} match no binding "
                f"(bindings: {', '.join(sorted(str(b['name']) for b in bindings))})"
            )
        specs.append(
            FunctionSpec(
                name=name,
                trigger_type=trigger_type,
                trigger=trigger,
                bindings=bindings,
                user_function=user_function,
                parameters=parameters,
            )
        )
    return specs
