"""The Function App of the Scheduler Agent Supervisor pattern (E1-E18).

Function bodies stay a few lines: parse the trigger, call a service or an activity module,
return. The same file runs on devhost (embedded profile) and on Azure Functions; only the
adapters behind the ports change, chosen by settings in ``bootstrap.py``.
"""

import asyncio
import functools
import json
import logging
import os
from collections.abc import Callable

import azure.durable_functions as df
import azure.functions as func

from activities import functions
from activities.functions import ActivityFunction
from adapters import telemetry_export
from adapters.clock import host_clock
from bootstrap import build_ports
from contracts import activities as contracts
from contracts.names import ATTEMPT_ORCHESTRATOR, Activity
from domain.errors import DependencyUnavailable
from first_engine_blueprint import first_engine
from orchestrators.order_attempt import run_attempt
from services import frontend, intake, scheduling
from services.context import Ports
from services.submit_order import SubmitOutcome
from services.telemetry import order_span
from settings import Settings

# No function keys: the caller's Entra application token is the authorisation (services/frontend.py).
app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
log = logging.getLogger("sas.app")

# Every Service Bus trigger asks for its body as bytes. Without a dataType the host binds it as
# text, decoding bytes that are not UTF-8 with U+FFFD in their place and never failing: the app
# could not tell a Latin-1 order from a valid one whose Customer is "Caf\ufffd", and would act on
# it. As bytes it reads what was sent and dead-letters such a body itself (InvalidEncoding, with
# an alert). And the host binds a body's JSON properties over the trigger metadata only for text
# (azure-functions-host Utility.ApplyBindingData), so no body can set what msg says of itself.
BODY_AS_SENT = func.DataType.BINARY


@functools.cache
def ports() -> Ports:
    telemetry_export.configure("function-app")
    return build_ports(Settings.from_env(os.environ), host_clock())


def _activity[I: contracts.AttemptInput, R, W: contracts.JsonObject | str](
    activity: ActivityFunction[I, R, W], payload: contracts.JsonObject
) -> W:
    """The activity's input parsed, its body run and its result written back as JSON. Every
    activity joins its order's trace, tagged with the attempt's instance ID (C11)."""
    work = activity.parse(payload)
    with order_span(f"activity.{activity.name}", work.OrderID, work.InstanceID):
        return activity.run(work, ports())


def _held_message(msg: func.ServiceBusMessage, queue: str) -> intake.HeldMessage:
    body = msg.get_body()
    shadowed = intake.shadowed_metadata(body)
    if shadowed:  # what the metadata says is the sender's: raise, so the broker counts it
        raise intake.refuse_shadowed(queue, msg.message_id or "", body, shadowed, ports())
    return intake.HeldMessage(
        queue=queue,
        message_id=msg.message_id or "",
        lock_token=msg.lock_token or "",
        body=body,
        properties=msg.application_properties or {},
    )


# --- Front end (E1, C3) -----------------------------------------------------------------------


def _http(respond: Callable[[], frontend.Reply], context: func.Context) -> func.HttpResponse:
    try:
        reply = respond()
    except DependencyUnavailable as outage:
        reply = frontend.unavailable(outage, ports())
    except Exception:
        # Any other failure (a queue that is not there, a bug) is still the API's JSON, and the
        # log line with its stack carries the invocation ID the caller is given.
        log.exception("%s failed (invocation %s)", context.function_name, context.invocation_id)
        reply = frontend.internal_error()
    return func.HttpResponse(
        json.dumps(frontend.with_invocation(reply, context.invocation_id).body),
        status_code=reply.status,
        headers=reply.headers,
        mimetype="application/json",
    )


@app.route(route="orders", methods=["POST"])
def post_order(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return _http(lambda: frontend.accept_order(req.get_body(), req.headers, ports()), context)


@app.route(route="orders/{order_id}", methods=["GET"])
def get_order(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return _http(lambda: frontend.order_view(req.route_params["order_id"], req.headers, ports()), context)


# --- Submission (E1-E2) ---------------------------------------------------------------------


@app.service_bus_queue_trigger(
    arg_name="msg",
    queue_name="%SAS_ORDERS_QUEUE%",
    connection="ServiceBusConnection",
    data_type=BODY_AS_SENT,
)
@app.durable_client_input(client_name="client")
async def submit_order(msg: func.ServiceBusMessage, client: df.DurableOrchestrationClient) -> None:
    # The stores' and the bus's clients block: off the event loop.
    held = _held_message(msg, ports().settings.orders_queue)
    try:
        result = await asyncio.to_thread(intake.handle_submission, held, ports())
    except DependencyUnavailable as outage:  # back later on a scheduled copy, not at once
        await asyncio.to_thread(intake.postpone, held, outage, ports())
        return
    except Exception as error:
        if (msg.delivery_count or 0) < ports().settings.orders_max_deliveries:
            raise  # abandon: the broker delivers it again
        await asyncio.to_thread(intake.give_up, held, error, ports())
        return
    if result is not None and result.outcome is SubmitOutcome.ACCEPTED and result.stored is not None:
        await scheduling.start_now(client, ports(), result.stored)  # E4 at once; the starter sweeps


# --- Scheduler: starter (E4) and orchestrator (E5-E12) --------------------------------------


@app.timer_trigger(schedule="%SAS_STARTER_SCHEDULE%", arg_name="timer", use_monitor=False)
@app.durable_client_input(client_name="client")
async def starter(timer: func.TimerRequest, client: df.DurableOrchestrationClient) -> None:
    await scheduling.start_pending(client, ports())


# Every new attempt, of any workflow version: the version is the record's (C7). Each durable
# function is registered under the name the orchestrators and the starter use
# (``contracts.names``), whatever its Python name.
@app.function_name(ATTEMPT_ORCHESTRATOR)
@app.orchestration_trigger(context_name="context")
def order_attempt(context: df.DurableOrchestrationContext):  # type: ignore[no-untyped-def]
    return (yield from run_attempt(context))


# An activity is handed a plain dict (JsonObject: an annotation the worker accepts, where it
# refuses dict[str, Any]); contracts.activities says what it holds.
# The Durable client input on an activity (docs/design.md "Work-conserving claims"): when the
# attempt ends, on the same call that wrote its final state, the freed slot starts the next order.
@app.function_name(Activity.ADVANCE.value)
@app.activity_trigger(input_name="payload")
@app.durable_client_input(client_name="client")
async def advance(
    payload: contracts.JsonObject, client: df.DurableOrchestrationClient
) -> contracts.JsonObject:
    # The stores' clients block: off the event loop, as in submit_order.
    result = await asyncio.to_thread(_activity, functions.advance, payload)
    if contracts.ADVANCE.read_result(result).Ending is not None:
        await scheduling.refill(client, ports(), ended=str(payload["InstanceID"]))
    return result


# The first engine (one orchestrator per version, one activity per action), registered until the
# instances it started before order_attempt was deployed have ended (C7: never changed while
# running). One blueprint, removed with this line: docs/operating.md "Retiring the first engine".
app.register_functions(first_engine(_activity))


# --- Agent replies (E9) ------------------------------------------------------------------------


@app.service_bus_queue_trigger(
    arg_name="msg",
    queue_name="%SAS_AGENT_REPLIES_QUEUE%",
    connection="ServiceBusConnection",
    data_type=BODY_AS_SENT,
)
@app.durable_client_input(client_name="client")
async def agent_reply(msg: func.ServiceBusMessage, client: df.DurableOrchestrationClient) -> None:
    # Off the event loop: rejecting a reply sends an alert and settles, both blocking calls.
    held = _held_message(msg, ports().settings.agent_replies_queue)
    parsed = await asyncio.to_thread(intake.parse_reply, held, ports())
    if parsed is None:
        return  # dead-lettered with its reason
    reply = parsed.reply
    with order_span(
        "agent.reply", parsed.order_id, reply.InstanceID, step=reply.Step, outcome=reply.Outcome.value
    ):
        try:
            await client.raise_event(parsed.instance, parsed.event, reply.model_dump(mode="json"))
        except Exception as error:
            if not intake.is_late_reply_error(error):
                raise  # abandon: the broker redelivers, up to the queue's max delivery count
            log.info("late reply %s for %s ignored: %s", reply.RequestID, reply.InstanceID, error)


# --- Supervisor (E13-E15) ----------------------------------------------------------------------


@app.timer_trigger(schedule="%SAS_SUPERVISOR_SCHEDULE%", arg_name="timer", use_monitor=False)
@app.durable_client_input(client_name="client")
async def supervisor(timer: func.TimerRequest, client: df.DurableOrchestrationClient) -> None:
    await scheduling.run_supervisor(client, ports())
