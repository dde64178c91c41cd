"""The activity functions as the Durable extension runs them: the JSON object the orchestrator
sent, parsed into the activity's input; its typed body (``activities.steps``); its result
written back as JSON, byte for byte the wire form of ``contracts.activities``.

``function_app.py`` registers each under its contract's name; a test may call one directly
with a plain dict, as the extension would.
"""

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from activities import steps
from contracts import activities as contracts
from contracts.activities import ActivityContract, AttemptInput, Contract, JsonObject
from contracts.names import Activity
from domain import transitions
from domain.errors import DependencyUnavailable, DomainError
from services.context import Ports
from services.fenced import fenced_update

log = logging.getLogger("sas.activities")


@dataclass(frozen=True)
class ActivityFunction[I: AttemptInput, R, W: JsonObject | str]:
    """An activity: its contract, the body that takes ``I`` and returns ``R``, and how ``R`` is
    written back (``W``: a JSON object, or a JSON string for ``send_agent_request``)."""

    contract: ActivityContract[I, R]
    body: Callable[[I, Ports], R]
    dump: Callable[[R], W]

    @property
    def name(self) -> Activity:
        return self.contract.name

    def parse(self, payload: Mapping[str, Any]) -> I:
        return self.contract.takes.model_validate(payload)

    def run(self, work: I, ports: Ports) -> W:
        try:
            return self.dump(self.body(work, ports))
        except DependencyUnavailable as outage:
            note_unavailable(work, ports, outage)
            raise  # the orchestrator retries the activity; its last failure ends the attempt

    def __call__(self, payload: Mapping[str, Any], ports: Ports) -> W:
        return self.run(self.parse(payload), ports)


def note_unavailable(work: AttemptInput, ports: Ports, outage: DependencyUnavailable) -> None:
    """Leave on the record that this attempt is failing on an outage, so that the Supervisor
    does not count its expiry against the order (``domain.outage``). Best effort: when the
    state store is what is down this fails too, and the Supervisor knows that outage itself."""
    try:
        fenced_update(
            ports.states,
            work.OrderID,
            lambda record: transitions.note_unavailable(
                record, instance=work.InstanceID, dependency=outage.dependency, now=ports.clock.now()
            ),
            cache=ports.records,
        )
    except (DependencyUnavailable, DomainError) as error:
        log.info("could not note the %s's outage on order %s: %s", outage.dependency, work.OrderID, error)


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
