"""A small function app that exercises every trigger and binding devhost supports.

Side effects go to the file named by SAMPLE_OUTPUT, one JSON line each, so that tests (and
a devhost in another process) can observe them.
"""

import json
import logging
import os
import random
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


# --- Durable samples: the patterns of Microsoft's Durable Functions documentation -------------


@app.orchestration_trigger(context_name="context")
def approval(context: df.DurableOrchestrationContext):
    """Human interaction: wait for an approval event, or escalate when the deadline passes."""
    deadline = context.current_utc_datetime + timedelta(hours=(context.get_input() or {}).get("hours", 72))
    timer = context.create_timer(deadline)
    answer = context.wait_for_external_event("ApprovalEvent")
    winner = yield context.task_any([answer, timer])
    if winner == answer:
        timer.cancel()
        return {"approved": answer.result}
    return (yield context.call_activity("greet", "escalation"))


@app.orchestration_trigger(context_name="context")
def monitor(context: df.DurableOrchestrationContext):
    """A monitor: poll an activity every 5 minutes until it reports done, then stop."""
    settings = context.get_input() or {}
    polls = 0
    while True:
        polls += 1
        context.set_custom_status({"polls": polls})
        done = yield context.call_activity("check", {"poll": polls, "done_at": settings.get("done_at", 3)})
        if done:
            return polls
        yield context.create_timer(context.current_utc_datetime + timedelta(minutes=5))


@app.orchestration_trigger(context_name="context")
def parent(context: df.DurableOrchestrationContext):
    """Sub-orchestrations: fan out to children (one with an ID of its own), and catch a failure."""
    named = context.call_sub_orchestrator("chain", ["x"], f"{context.instance_id}-child")
    unnamed = context.call_sub_orchestrator("chain", ["y", "z"])
    results = yield context.task_all([named, unnamed])
    try:
        yield context.call_sub_orchestrator("crash")
    except Exception as error:  # noqa: BLE001 - a child's failure arrives as a plain Exception
        results.append(f"caught: {error}")
    return results


@app.orchestration_trigger(context_name="context")
def retrying(context: df.DurableOrchestrationContext):
    """call_activity_with_retry: the activity fails ``fail`` times before it succeeds."""
    settings = context.get_input() or {}
    options = df.RetryOptions(
        first_retry_interval_in_milliseconds=30_000, max_number_of_attempts=settings["attempts"]
    )
    work = {"key": context.instance_id, **settings}
    try:
        return (yield context.call_activity_with_retry("flaky", options, work))
    except Exception as error:  # noqa: BLE001 - the last attempt's failure
        return f"gave up: {error}"


@app.orchestration_trigger(context_name="context")
def eternal(context: df.DurableOrchestrationContext):
    """ContinueAsNew with a timer between generations, as the eternal orchestration pattern."""
    generation = context.get_input() or 0
    context.set_custom_status({"generation": generation})
    yield context.create_timer(context.current_utc_datetime + timedelta(hours=1))
    if generation >= 2:
        return generation
    context.continue_as_new(generation + 1)
    return None


@app.orchestration_trigger(context_name="context")
def suspendable(context: df.DurableOrchestrationContext):
    yield context.wait_for_external_event("Never")
    return "unreachable"


@app.activity_trigger(input_name="poll")
def check(poll: dict) -> bool:
    return bool(poll["poll"] >= poll["done_at"])


@app.activity_trigger(input_name="work")
def flaky(work: dict) -> str:
    record("flaky", key=work["key"])
    with open(os.environ["SAMPLE_OUTPUT"]) as lines:
        attempts = sum(1 for line in lines if json.loads(line).get("key") == work["key"])
    if attempts <= work["fail"]:
        raise RuntimeError(f"attempt {attempts} fails")
    return f"succeeded on attempt {attempts}"


# --- Microsoft's azure-functions-durable-python samples, in their shapes -----------------------
# The retries sample of the error-handling docs calls its activity with no input; the
# human-interaction sample (E4_SMSPhoneVerification) waits up to three times for the same event
# against one timer. The Twilio binding of SendSMSChallenge is left out: the code is recorded.


@app.orchestration_trigger(context_name="context")
def retry_sample(context: df.DurableOrchestrationContext):
    retry_options = df.RetryOptions(first_retry_interval_in_milliseconds=5000, max_number_of_attempts=3)
    result = yield context.call_activity_with_retry("flaky_function", retry_options)
    return result


@app.activity_trigger(input_name="ignored")
def flaky_function(ignored: str) -> str:
    record("flaky_function", received=ignored)
    if len([r for r in _records() if r["kind"] == "flaky_function"]) == 1:
        raise RuntimeError("FlakyFunction flaked")
    return "succeeded"


def _records() -> list[dict]:
    with open(os.environ["SAMPLE_OUTPUT"]) as lines:
        return [json.loads(line) for line in lines]


# --- Microsoft's human_interaction sample, as-is ---------------------------------------------------
# Azure/azure-functions-durable-python samples/human_interaction (E4_SMSPhoneVerification,
# SendSMSChallenge, HttpStart), moved to the v2 decorators devhost indexes and otherwise unchanged:
# the orchestrator's body verbatim, the activity's seeded random code returned as a string, the
# starter's create_check_status_response. Only the Twilio output binding is gone (devhost hosts no
# Twilio); its payload is recorded instead, so a test can read the code the "SMS" carried.


def is_valid_phone_number(phone_number: str):
    has_area_code = phone_number[0] == "+"
    is_positive_num = phone_number[1:].isdigit()
    return has_area_code and is_positive_num


@app.function_name(name="E4_SMSPhoneVerification")
@app.orchestration_trigger(context_name="context")
def e4_sms_phone_verification(context: df.DurableOrchestrationContext):
    phone_number = context.get_input()

    if (not phone_number) or (not is_valid_phone_number(phone_number)):
        msg = (
            "Please provide a phone number beginning with an international dialing prefix"
            "(+) followed by the country code, and then rest of the phone number. Example:"
            "'+1425XXXXXXX'"
        )
        raise Exception(msg)

    challenge_code = yield context.call_activity("SendSMSChallenge", phone_number)

    expiration = context.current_utc_datetime + timedelta(seconds=180)
    timeout_task = context.create_timer(expiration)

    authorized = False
    for _ in range(3):
        challenge_response_task = context.wait_for_external_event("SmsChallengeResponse")
        winner = yield context.task_any([challenge_response_task, timeout_task])

        if winner == challenge_response_task:
            # We got back a response! Compare it to the challenge code
            if challenge_response_task.result == challenge_code:
                authorized = True
                break
        else:
            # Timeout expired
            break

    if not timeout_task.is_completed:
        # All pending timers must be complete or canceled before the function exits.
        timeout_task.cancel()

    return authorized


random.seed(10)


@app.function_name(name="SendSMSChallenge")
@app.activity_trigger(input_name="phoneNumber")
def send_sms_challenge_sample(phoneNumber):
    code = random.randint(0, 10000)
    payload = {"body": f"Your verification code is {code}", "to": phoneNumber}
    record("twilio", message=json.dumps(payload), code=code)
    code_str = str(code)
    return code_str


@app.function_name(name="HttpStart")
@app.route(route="orchestrators/{functionName}", methods=["POST"])
@app.durable_client_input(client_name="starter")
async def http_start(req: func.HttpRequest, starter: df.DurableOrchestrationClient) -> func.HttpResponse:
    payload: str = json.loads(req.get_body().decode())
    instance_id = await starter.start_new(req.route_params["functionName"], client_input=payload)
    logging.info(f"Started orchestration with ID = '{instance_id}'.")
    return starter.create_check_status_response(req, instance_id)
