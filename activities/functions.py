"""The activity functions as the Durable extension runs them: the JSON object the orchestrator
sent, parsed into the activity's input; its typed body (``activities.steps``); its result
written back as JSON, byte for byte the wire form of ``activities.contracts``.

``function_app.py`` registers each under its contract's name; a test may call one directly
with a plain dict, as the extension would.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from activities import contracts, steps
from activities.contracts import ActivityContract, AttemptInput, Contract, JsonObject
from domain.workflow import Activity
from services.context import Ports


@dataclass(frozen=True)
class ActivityFunction[I: AttemptInput, R, W: JsonObject | str]:
    """An activity: its contract, the body that takes ``I`` and answers ``R``, and how ``R`` is
    written back (``W``: a JSON object, or a JSON string for ``send_agent_request``)."""

    contract: ActivityContract[I, R]
    body: Callable[[I, Ports], R]
    dump: Callable[[R], W]

    @property
    def name(self) -> Activity:
        return self.contract.name

    def parse(self, payload: Mapping[str, Any]) -> I:
        return self.contract.takes.model_validate(payload)

    def answer(self, work: I, ports: Ports) -> W:
        return self.dump(self.body(work, ports))

    def __call__(self, payload: Mapping[str, Any], ports: Ports) -> W:
        return self.answer(self.parse(payload), ports)


def _wire(result: Contract) -> JsonObject:
    return JsonObject(result.wire())


advance = ActivityFunction(contracts.ADVANCE, steps.advance, _wire)
# The first engine's: one per action.
read_order = ActivityFunction(contracts.READ_ORDER, steps.read_order, _wire)
begin_step = ActivityFunction(contracts.BEGIN_STEP, steps.begin_step, _wire)
send_agent_request = ActivityFunction(contracts.SEND_AGENT_REQUEST, steps.send_agent_request, str)
record_step = ActivityFunction(contracts.RECORD_STEP, steps.record_step, _wire)
run_local_step = ActivityFunction(contracts.RUN_LOCAL_STEP, steps.run_local_step, _wire)
finish = ActivityFunction(contracts.FINISH, steps.finish, _wire)
