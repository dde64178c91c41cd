"""The first engine's functions, as one blueprint: its orchestrators (one per workflow version)
and the activities only it calls (one per action), registered by one line in ``function_app.py``.

The first engine is kept for the attempts it started before ``order_attempt`` was deployed: an
orchestration's code never changes while an instance of it runs (C7). New attempts never start
on it. It goes in three stages (docs/operating.md "Retiring the first engine"): stop starting it
(done: the starters start ``order_attempt``), let what it started drain until ``python -m ops
instances --name order_workflow_v1`` (and ``_v2``) shows none Running or Pending, then delete
this module, ``orchestrators/first_engine.py`` and the ``register_functions`` line, in one
deployment.

What the activities run (``activities.functions``) the app's ``_activity`` does, handed in, so
that a test replacing the app's ports (``function_app.ports``) reaches these too.
"""

from typing import Protocol

import azure.durable_functions as df

from activities import functions
from activities.functions import ActivityFunction
from contracts.activities import AttemptInput, JsonObject
from contracts.names import Activity, orchestrator_name
from domain.sample_workflow import ORDER_WORKFLOW_V1, ORDER_WORKFLOW_V2
from orchestrators.first_engine import run_workflow


class RunActivity(Protocol):
    """Runs an activity's body on its JSON input with the app's ports; returns its JSON result."""

    def __call__[I: AttemptInput, R, W: JsonObject | str](
        self, activity: ActivityFunction[I, R, W], payload: JsonObject, /
    ) -> W: ...


def first_engine(run: RunActivity) -> df.Blueprint:
    """The first engine's functions, each registered under the name its instances call it by."""
    bp = df.Blueprint()

    @bp.function_name(orchestrator_name(ORDER_WORKFLOW_V1.version))
    @bp.orchestration_trigger(context_name="context")
    def order_workflow_v1(context: df.DurableOrchestrationContext):  # type: ignore[no-untyped-def]
        return (yield from run_workflow(context, ORDER_WORKFLOW_V1))

    @bp.function_name(orchestrator_name(ORDER_WORKFLOW_V2.version))
    @bp.orchestration_trigger(context_name="context")
    def order_workflow_v2(context: df.DurableOrchestrationContext):  # type: ignore[no-untyped-def]
        return (yield from run_workflow(context, ORDER_WORKFLOW_V2))

    @bp.function_name(Activity.READ_ORDER.value)
    @bp.activity_trigger(input_name="payload")
    def read_order(payload: JsonObject) -> JsonObject:
        return run(functions.read_order, payload)

    @bp.function_name(Activity.BEGIN_STEP.value)
    @bp.activity_trigger(input_name="payload")
    def begin_step(payload: JsonObject) -> JsonObject:
        return run(functions.begin_step, payload)

    @bp.function_name(Activity.SEND_AGENT_REQUEST.value)
    @bp.activity_trigger(input_name="payload")
    def send_agent_request(payload: JsonObject) -> str:
        return run(functions.send_agent_request, payload)

    @bp.function_name(Activity.RECORD_STEP.value)
    @bp.activity_trigger(input_name="payload")
    def record_step(payload: JsonObject) -> JsonObject:
        return run(functions.record_step, payload)

    @bp.function_name(Activity.RUN_LOCAL_STEP.value)
    @bp.activity_trigger(input_name="payload")
    def run_local_step(payload: JsonObject) -> JsonObject:
        return run(functions.run_local_step, payload)

    @bp.function_name(Activity.FINISH.value)
    @bp.activity_trigger(input_name="payload")
    def finish(payload: JsonObject) -> JsonObject:
        return run(functions.finish, payload)

    return bp
