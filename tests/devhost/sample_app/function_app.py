"""A small function app that exercises every trigger and binding devhost supports.

Side effects go to the file named by SAMPLE_OUTPUT, one JSON line each, so that tests (and
a devhost in another process) can observe them.
"""

import json
import os
import threading
from datetime import timedelta

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
_write_lock = threading.Lock()


def record(kind: str, **data: object) -> None:
    with _write_lock, open(os.environ["SAMPLE_OUTPUT"], "a") as out:
        out.write(json.dumps({"kind": kind, **data}) + "\n")


@app.route(route="hello/{who}", methods=["GET"])
def hello(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(
        json.dumps({"hello": req.route_params["who"], "q": req.params.get("q")}),
        mimetype="application/json",
    )


@app.route(route="start/{name}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    instance_id = await client.start_new(
        req.route_params["name"], req.params.get("id"), json.loads(body) if body else None
    )
    return func.HttpResponse(json.dumps({"id": instance_id}), status_code=202, mimetype="application/json")


@app.route(route="raise/{instance}/{event}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def raise_event(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    try:
        await client.raise_event(
            req.route_params["instance"], req.route_params["event"], json.loads(body) if body else None
        )
    except Exception as error:  # noqa: BLE001 - the SDK raises on 404 and 410: report what it said
        return func.HttpResponse(str(error), status_code=409)
    return func.HttpResponse(status_code=202)


@app.route(route="status/{instance}", methods=["GET"])
@app.durable_client_input(client_name="client")
async def status(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    found = await client.get_status(req.route_params["instance"])
    state = None if found.runtime_status is None else found.runtime_status.value
    return func.HttpResponse(
        json.dumps({"status": state, "output": found.output, "custom": found.custom_status}),
        mimetype="application/json",
    )


@app.service_bus_queue_trigger(arg_name="msg", queue_name="%WORK_QUEUE%", connection="ServiceBusConnection")
def work(msg: func.ServiceBusMessage) -> None:
    body = json.loads(msg.get_body())
    if body.get("action") == "fail":
        raise RuntimeError(f"failing on purpose (delivery {msg.delivery_count})")
    record(
        "work",
        id=body.get("id"),
        message_id=msg.message_id,
        correlation_id=msg.correlation_id,
        delivery_count=msg.delivery_count,
        properties=msg.application_properties,
    )


@app.timer_trigger(schedule="0 */10 * * * *", arg_name="timer", run_on_startup=False, use_monitor=True)
def tick(timer: func.TimerRequest) -> None:
    record("tick", past_due=timer.past_due)


@app.orchestration_trigger(context_name="context")
def chain(context: df.DurableOrchestrationContext):
    results = []
    for item in context.get_input() or ["a", "b", "c"]:
        results.append((yield context.call_activity("greet", item)))
    return results


@app.orchestration_trigger(context_name="context")
def slow_chain(context: df.DurableOrchestrationContext):
    """Activities with short durable timers between them: the kill -9 test's workload."""
    steps = (context.get_input() or {}).get("steps", 4)
    total = 0
    for step in range(steps):
        total += yield context.call_activity("count", {"instance": context.instance_id, "step": step})
        yield context.create_timer(context.current_utc_datetime + timedelta(milliseconds=50))
    return total


@app.orchestration_trigger(context_name="context")
def race(context: df.DurableOrchestrationContext):
    settings = context.get_input() or {}
    deadline = context.current_utc_datetime + timedelta(seconds=settings.get("timeout", 1800))
    timer = context.create_timer(deadline)
    approval = context.wait_for_external_event("Approval")
    winner = yield context.task_any([approval, timer])
    if winner == approval:
        if settings.get("cancel", True):
            timer.cancel()
        return f"approved:{approval.result}"
    return "timed out"


@app.orchestration_trigger(context_name="context")
def catch(context: df.DurableOrchestrationContext):
    try:
        yield context.call_activity("boom", "x")
    except Exception as error:  # noqa: BLE001 - the activity failure arrives as a plain Exception
        return f"caught: {error}"
    return "not caught"


@app.orchestration_trigger(context_name="context")
def crash(context: df.DurableOrchestrationContext):
    yield context.call_activity("greet", "before")
    raise ValueError("kaput")


@app.orchestration_trigger(context_name="context")
def counter(context: df.DurableOrchestrationContext):
    count = context.get_input() or 0
    context.set_custom_status({"count": count})
    yield context.wait_for_external_event("Go")
    if count + 1 >= 3:
        return count + 1
    context.continue_as_new(count + 1)
    return None


_calls = {"n": 0}


@app.orchestration_trigger(context_name="context")
def fickle(context: df.DurableOrchestrationContext):
    """Non-deterministic on purpose: it asks for a different activity on every replay."""
    _calls["n"] += 1
    yield context.call_activity("greet" if _calls["n"] % 2 else "count", "x")
    yield context.call_activity("greet", "y")
    return "unreachable"


@app.activity_trigger(input_name="name")
def greet(name: str) -> str:
    return f"hello {name}"


@app.activity_trigger(input_name="work")
def count(work: dict) -> int:
    record("count", **work)
    return 1


@app.activity_trigger(input_name="value")
def boom(value: str) -> str:
    raise KeyError(f"no such thing: {value}")
