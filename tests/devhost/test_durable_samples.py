"""The Durable Functions application patterns, as the documentation shows them, run on devhost
through the HTTP API a caller uses (https://learn.microsoft.com/azure/azure-functions/durable/durable-functions-overview).

The orchestrators are in tests/devhost/sample_app/function_app.py. Time is the host's virtual
clock: a 72-hour deadline or a 5-minute poll takes milliseconds, and every wait is on a condition.
"""

import json
from datetime import timedelta
from typing import Any

from harness.devhost.durable_wire import EventType
from tests.support.devhost_sample import Sample
from tests.support.durable_http import JSON, call, start


def status(sample: Sample, urls: dict[str, Any], query: str = "") -> dict[str, Any]:
    code, body, _ = call(sample, "GET", urls["statusQueryGetUri"] + query)
    assert code in (200, 202)
    return dict(body)


def custom(sample: Sample, instance_id: str) -> dict[str, Any]:
    return dict(sample.status(instance_id)["customStatus"] or {})


def test_human_interaction_approved_before_the_deadline(sample: Sample) -> None:
    """Human interaction: the approval event wins the race with the timer, which is cancelled."""
    urls = start(sample, "approval", {"hours": 72})
    began = sample.host.clock.now()
    sample.run(sample.host.run_until(lambda: sample.status(urls["id"])["runtimeStatus"] == "Running"))
    url = urls["sendEventPostUri"].replace("{eventName}", "ApprovalEvent")
    assert call(sample, "POST", url, b"true", JSON)[0] == 202
    sample.run_until_finished(urls["id"])
    assert status(sample, urls)["output"] == {"approved": True}
    assert sample.host.clock.now() - began < timedelta(hours=72)


def test_human_interaction_escalates_when_the_deadline_passes(sample: Sample) -> None:
    urls = start(sample, "approval", {"hours": 72})
    began = sample.host.clock.now()
    sample.run_until_finished(urls["id"])
    assert status(sample, urls)["output"] == "hello escalation"
    assert sample.host.clock.now() - began == timedelta(hours=72)


def test_monitor_polls_until_done_with_custom_status(sample: Sample) -> None:
    """Monitor: a loop of an activity and a 5-minute timer; custom status shows the progress."""
    urls = start(sample, "monitor", {"done_at": 3})
    began = sample.host.clock.now()
    sample.run(sample.host.run_until(lambda: custom(sample, urls["id"]).get("polls") == 2))
    sample.run_until_finished(urls["id"])
    final = status(sample, urls)
    assert (final["output"], final["customStatus"]) == (3, {"polls": 3})
    assert sample.host.clock.now() - began == timedelta(minutes=10)


def test_sub_orchestrations_return_their_outputs_and_failures(sample: Sample) -> None:
    """Sub-orchestrations: children named or not, their outputs to the parent, a child's
    failure caught by the parent; the children are instances of their own."""
    urls = start(sample, "parent", instance_id="p1")
    sample.run_until_finished("p1")
    output = status(sample, urls)["output"]
    assert output[:2] == [["hello x"], ["hello y", "hello z"]]
    # The SDK words a failed task "<Reason> \n <Details>".
    assert output[2].startswith("caught: Orchestrator function 'crash' failed: kaput \n")
    child = sample.status("p1-child")
    assert (child["name"], child["runtimeStatus"]) == ("chain", "Completed")
    history = status(sample, urls, "&showHistory=true&showHistoryOutput=true")["historyEvents"]
    completed = [e for e in history if e["EventType"] == "SubOrchestrationInstanceCompleted"]
    assert [e["FunctionName"] for e in completed] == ["chain", "chain"]
    assert [e["EventType"] for e in history].count("SubOrchestrationInstanceFailed") == 1


def test_retries_succeed_after_failed_attempts_with_the_retry_interval(sample: Sample) -> None:
    """call_activity_with_retry: each failed attempt waits firstRetryInterval (30 s), as
    DurableTask.Core's RetryInterceptor schedules it."""
    urls = start(sample, "retrying", {"attempts": 4, "fail": 2})
    began = sample.host.clock.now()
    sample.run_until_finished(urls["id"])
    assert status(sample, urls)["output"] == "succeeded on attempt 3"
    assert sample.host.clock.now() - began == timedelta(seconds=60)
    assert len(sample.records("flaky")) == 3


def test_retries_give_up_after_the_last_attempt(sample: Sample) -> None:
    """After the last failed attempt DTFx schedules a timer that fires at once, then the call
    fails with the last attempt's error."""
    urls = start(sample, "retrying", {"attempts": 2, "fail": 5})
    began = sample.host.clock.now()
    sample.run_until_finished(urls["id"])
    output = status(sample, urls)["output"]
    assert output.startswith("gave up: Activity function 'flaky' failed: RuntimeError")
    assert "attempt 2 fails" in output
    assert sample.host.clock.now() - began == timedelta(seconds=30)
    history = status(sample, urls, "&showHistory=true")["historyEvents"]
    kinds = [e["EventType"] for e in history if e["EventType"] in ("TaskFailed", "TimerFired")]
    assert kinds == ["TaskFailed", "TimerFired", "TaskFailed", "TimerFired"]


def test_eternal_orchestration_continues_as_new(sample: Sample) -> None:
    """ContinueAsNew: each generation restarts with a fresh history and the new input."""
    urls = start(sample, "eternal", 0, instance_id="forever")
    sample.run(sample.host.run_until(lambda: custom(sample, "forever").get("generation") == 1))
    assert json.dumps(status(sample, urls)["input"]) == "1"
    sample.run_until_finished("forever")
    assert status(sample, urls)["output"] == 2
    history = status(sample, urls, "&showHistory=true")["historyEvents"]
    assert [e["EventType"] for e in history].count("ExecutionStarted") == 1


# --- Microsoft's azure-functions-durable-python samples, in their shapes ------------------------


def has_event(sample: Sample, instance_id: str, kind: EventType, count: int = 1) -> bool:
    return bool(sum(e["EventType"] == kind for e in sample.host.engine.history(instance_id)) >= count)


def test_the_retries_sample_calls_an_activity_with_no_input_until_it_succeeds(sample: Sample) -> None:
    """The error-handling docs' ``call_activity_with_retry("FlakyFunction", retry_options)``: the
    SDK sends no input as the text "null", which the extension hands the activity verbatim, so
    the worker decodes None on every attempt, the retry's as well as the first."""
    urls = start(sample, "retry_sample")
    sample.run_until_finished(urls["id"])
    assert (status(sample, urls)["runtimeStatus"], status(sample, urls)["output"]) == (
        "Completed",
        "succeeded",
    )
    assert [r["received"] for r in sample.records("flaky_function")] == [None, None]


def test_a_raw_json_string_body_is_the_input_decoded_once(sample: Sample) -> None:
    """``POST /orchestrators/chain`` with the body ``"hello"``: the extension deserialises it
    once, to the string hello, and the status shows that string (DurableClient.ParseToJToken)."""
    urls = start(sample, "chain", "hello")
    code, body, _ = call(sample, "GET", urls["statusQueryGetUri"])
    assert (code, body["input"]) == (202, "hello")


def start_sms_sample(sample: Sample) -> tuple[dict[str, Any], str]:
    """samples/human_interaction unchanged (sample_app's last section), started through its
    HttpStart: the create_check_status_response's URLs, and where to raise the response."""
    code, text = sample.http("POST", "/api/orchestrators/E4_SMSPhoneVerification", "+14255550100")
    assert code == 202, text
    urls = json.loads(text)
    return urls, urls["sendEventPostUri"].replace("{eventName}", "SmsChallengeResponse")


def test_microsofts_human_interaction_sample_as_is_takes_a_wrong_code_then_the_right_one(
    sample: Sample,
) -> None:
    """Raised through the sendEventPostUri the sample's starter hands out, while the
    orchestration waits: each raise is one EventRaised, taken by the wait open at the time."""
    urls, raise_url = start_sms_sample(sample)
    sample.run(sample.host.run_until(lambda: has_event(sample, urls["id"], EventType.TIMER_CREATED)))
    [sms] = sample.records("twilio")
    wrong, right = json.dumps("not a code"), json.dumps(str(sms["code"]))
    assert call(sample, "POST", raise_url, wrong.encode(), JSON)[0] == 202
    sample.run(sample.host.run_until(lambda: has_event(sample, urls["id"], EventType.EVENT_RAISED)))
    assert call(sample, "POST", raise_url, right.encode(), JSON)[0] == 202
    sample.run_until_finished(urls["id"])
    final = status(sample, urls, "&showHistory=true")
    assert (final["runtimeStatus"], final["output"]) == ("Completed", True)
    history = final["historyEvents"]
    assert [e["Input"] for e in history if e["EventType"] == "EventRaised"] == [wrong, right]
    assert "TimerFired" not in [e["EventType"] for e in history]


def test_microsofts_human_interaction_sample_as_is_with_a_code_raised_before_the_wait(
    sample: Sample,
) -> None:
    """An event raised before the orchestration waits for it is kept in the history (DTFx
    appends it as it arrives) and answers every later wait of that name: azure-functions-durable
    keeps the deferred completion after applying it ("Potential duplicate Task completion",
    https://github.com/Azure/azure-functions-durable-python/issues/507, open). So one wrong
    code spends all three tries and the sample ends unauthorised before its timer, on Azure as
    here; a later raise finds the instance completed."""
    urls, raise_url = start_sms_sample(sample)
    began = sample.host.clock.now()
    assert call(sample, "POST", raise_url, json.dumps("not a code").encode(), JSON)[0] == 202
    sample.run_until_finished(urls["id"])
    final = status(sample, urls, "&showHistory=true")
    assert (final["runtimeStatus"], final["output"]) == ("Completed", False)
    kinds = [e["EventType"] for e in final["historyEvents"]]
    assert (kinds.count("EventRaised"), "TimerFired" in kinds) == (1, False)
    assert sample.host.clock.now() - began < timedelta(seconds=180)
    [sms] = sample.records("twilio")
    assert call(sample, "POST", raise_url, json.dumps(str(sms["code"])).encode(), JSON)[0] == 410
