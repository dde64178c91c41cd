"""Conformance of devhost's Durable HTTP API with the Durable extension's.

Written from the extension's source (Azure/azure-functions-durable-extension,
src/WebJobs.Extensions.DurableTask/: ``HttpApiHandler.cs``, ``StatusResponsePayload.cs``,
``ContextImplementations/DurableClient.cs``), DurableTask.AzureStorage (Azure/durabletask) and
the HTTP API reference (https://learn.microsoft.com/azure/azure-functions/durable/durable-functions-http-api).
Each test names the part it follows. Requests go straight to the webhook endpoints, as a caller
with ``statusQueryGetUri`` in hand would make them.
"""

import json
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

from azure.durable_functions.models.DurableOrchestrationStatus import DurableOrchestrationStatus

from harness.devhost.durable_api import BASE
from tests.support.devhost_sample import Sample
from tests.support.durable_http import JSON, call, start

HTTP_API = "https://learn.microsoft.com/azure/azure-functions/durable/durable-functions-http-api"


def finish(sample: Sample, instance_id: str) -> None:
    sample.run_until_finished(instance_id)


# --- status codes per runtime status (HttpApiHandler.HandleGetStatusRequestAsync) --------------


def test_running_answers_202_with_location_and_retry_after(sample: Sample) -> None:
    """Running/Pending: 202, Location = the request URI, Retry-After 5."""
    urls = start(sample, "suspendable")
    status, body, headers = call(sample, "GET", urls["statusQueryGetUri"])
    assert status == 202
    assert body["runtimeStatus"] in ("Pending", "Running")
    assert headers["Location"] == urls["statusQueryGetUri"]
    assert headers["Retry-After"] == "5"


def test_completed_answers_200_without_location(sample: Sample) -> None:
    urls = start(sample, "chain", ["a"])
    finish(sample, urls["id"])
    status, body, headers = call(sample, "GET", urls["statusQueryGetUri"])
    assert (status, body["runtimeStatus"], body["output"]) == (200, "Completed", ["hello a"])
    assert "Location" not in headers


def test_failed_answers_200_and_500_only_when_asked(sample: Sample) -> None:
    """Failed: 200, or 500 with returnInternalServerErrorOnFailure=true (appended to the URL)."""
    urls = start(sample, "crash")
    finish(sample, urls["id"])
    status, body, _ = call(sample, "GET", urls["statusQueryGetUri"])
    assert (status, body["runtimeStatus"]) == (200, "Failed")
    status, _, _ = call(sample, "GET", urls["statusQueryGetUri"] + "&returnInternalServerErrorOnFailure=true")
    assert status == 500


def test_failed_output_names_the_orchestrator(sample: Sample) -> None:
    """OutOfProcOrchestrationShim.ScheduleDurableTaskEvents: "Orchestrator function '<name>'
    failed: <the SDK's error>"."""
    urls = start(sample, "crash")
    finish(sample, urls["id"])
    _, body, _ = call(sample, "GET", urls["statusQueryGetUri"])
    assert body["output"] == "Orchestrator function 'crash' failed: kaput"


def test_terminated_answers_200(sample: Sample) -> None:
    urls = start(sample, "suspendable")
    status, _, _ = call(sample, "POST", urls["terminatePostUri"].replace("{text}", "enough"))
    assert status == 202
    status, body, _ = call(sample, "GET", urls["statusQueryGetUri"])
    assert (status, body["runtimeStatus"], body["output"]) == (200, "Terminated", "enough")


def test_unknown_instance_answers_404(sample: Sample) -> None:
    status, _, _ = call(sample, "GET", "/instances/nobody")
    assert status == 404


def test_times_are_whole_seconds_in_utc(sample: Sample) -> None:
    """ConvertFrom: ``CreatedTime.ToString("s") + "Z"``."""
    urls = start(sample, "chain", ["a"])
    _, body, _ = call(sample, "GET", urls["statusQueryGetUri"])
    assert len(body["createdTime"]) == 20 and body["createdTime"].endswith("Z")


# --- URL shapes (HttpApiHandler.GetClientResponseLinks, CreateCheckStatusResponseMessage) -------


def test_start_answers_the_check_status_response(sample: Sample) -> None:
    status, body, headers = call(sample, "POST", "/orchestrators/chain", json.dumps(["a"]).encode())
    assert status == 202
    assert headers["Location"] == body["statusQueryGetUri"]
    assert headers["Retry-After"] == "10"
    prefix = f"{sample.host.base_url}{BASE}/instances/{body['id']}"
    query = "taskHub=devhost&connection=Storage"
    assert body["statusQueryGetUri"] == f"{prefix}?{query}"
    assert body["sendEventPostUri"] == f"{prefix}/raiseEvent/{{eventName}}?{query}"
    assert body["terminatePostUri"] == f"{prefix}/terminate?reason={{text}}&{query}"
    assert body["purgeHistoryDeleteUri"] == f"{prefix}?{query}"
    assert body["restartPostUri"] == f"{prefix}/restart?{query}"


def test_every_management_url_carries_the_task_hub_and_connection(sample: Sample) -> None:
    urls = start(sample, "chain", ["a"])
    for key, url in urls.items():
        if key == "id":
            continue
        query = parse_qs(urlsplit(url).query)
        assert query["taskHub"] == ["devhost"] and query["connection"] == ["Storage"], key


def test_what_devhost_refuses_is_not_advertised_and_answers_501(sample: Sample) -> None:
    """The extension advertises suspend and resume, and serves rewind: devhost supports none of
    them, so it leaves them out of the URLs and answers 501 with a message (harness/devhost/README.md)."""
    urls = start(sample, "suspendable")
    assert not {"suspendPostUri", "resumePostUri", "rewindPostUri"} & set(urls)
    binding = json.loads(sample.host.client_json())
    assert not {"suspendPostUri", "resumePostUri", "rewindPostUri"} & set(binding["managementUrls"])
    for operation in ("suspend", "resume", "rewind"):
        status, body, _ = call(sample, "POST", f"/instances/{urls['id']}/{operation}?reason=x")
        assert status == 501 and "devhost does not support" in body["Message"], operation
    status, body, _ = call(sample, "GET", "/entities/counter/one")
    assert status == 501 and "Durable Entities" in body["Message"]


def test_an_operation_on_an_unknown_instance_answers_404_before_the_refusal(sample: Sample) -> None:
    """HandleSuspendInstanceRequestAsync and the others look the instance up first."""
    for operation in ("suspend", "resume", "rewind"):
        status, _, _ = call(sample, "POST", f"/instances/nobody/{operation}")
        assert status == 404


def test_a_method_a_route_does_not_take_answers_404(sample: Sample) -> None:
    """HandleRequestAsync answers NotFound for any other method, not 405."""
    urls = start(sample, "chain", ["a"])
    assert call(sample, "GET", "/orchestrators/chain")[0] == 404
    assert call(sample, "GET", f"/instances/{urls['id']}/terminate")[0] == 404
    assert call(sample, "PUT", f"/instances/{urls['id']}")[0] == 404


def test_the_binding_is_the_extensions_shape(sample: Sample) -> None:
    """BindingHelper.DurableOrchestrationClientToString (OrchestrationClientInputData)."""
    binding = json.loads(sample.host.client_json())
    base = f"{sample.host.base_url}{BASE}"
    assert binding["baseUrl"] == base and binding["rpcBaseUrl"] == base + "/"
    assert binding["managementUrls"]["id"] == "INSTANCEID"
    assert binding["creationUrls"]["createNewInstancePostUri"].startswith(f"{base}/orchestrators/")


# --- showHistory / showHistoryOutput / showInput (DurableClient.GetDurableOrchestrationStatusAsync)


def test_show_history_returns_history_events_projected(sample: Sample) -> None:
    urls = start(sample, "chain", ["a", "b"])
    finish(sample, urls["id"])
    _, body, _ = call(sample, "GET", urls["statusQueryGetUri"] + "&showHistory=true")
    assert "history" not in body
    events = body["historyEvents"]
    kinds = [e["EventType"] for e in events]
    assert kinds == ["ExecutionStarted", "TaskCompleted", "TaskCompleted", "ExecutionCompleted"]
    assert events[0]["FunctionName"] == "chain"
    assert [e["FunctionName"] for e in events[1:3]] == ["greet", "greet"]
    assert all("ScheduledTime" in e for e in events[1:3])
    assert not any(k in e for e in events for k in ("EventId", "IsPlayed", "TaskScheduledId"))
    assert not any("Result" in e for e in events)
    assert events[-1]["OrchestrationStatus"] == "Completed"


def test_show_history_output_adds_results_as_json(sample: Sample) -> None:
    urls = start(sample, "chain", ["a"])
    finish(sample, urls["id"])
    query = "&showHistory=true&showHistoryOutput=true"
    _, body, _ = call(sample, "GET", urls["statusQueryGetUri"] + query)
    events = body["historyEvents"]
    assert events[1]["Result"] == "hello a"
    assert events[-1]["Result"] == ["hello a"]


def test_show_input_false_drops_the_input_everywhere(sample: Sample) -> None:
    urls = start(sample, "chain", ["a"])
    finish(sample, urls["id"])
    _, body, _ = call(sample, "GET", urls["statusQueryGetUri"] + "&showHistory=true&showInput=false")
    assert body["input"] is None
    assert not any("Input" in e for e in body["historyEvents"])
    _, body, _ = call(sample, "GET", urls["statusQueryGetUri"] + "&showHistory=true")
    assert body["input"] == ["a"]
    assert body["historyEvents"][1]["Input"] == json.dumps("a")


def test_history_is_left_out_without_show_history(sample: Sample) -> None:
    """StatusResponsePayload.HistoryEvents has EmitDefaultValue = false."""
    urls = start(sample, "chain", ["a"])
    finish(sample, urls["id"])
    _, body, _ = call(sample, "GET", urls["statusQueryGetUri"])
    assert "historyEvents" not in body


def test_the_sdk_reads_history_events_as_azure_sends_them(sample: Sample) -> None:
    """The SDK's DurableOrchestrationStatus maps only ``history``: with Azure's payload its
    ``history`` stays None and the events are under ``historyEvents``."""
    urls = start(sample, "chain", ["a"])
    finish(sample, urls["id"])
    _, body, _ = call(sample, "GET", urls["statusQueryGetUri"] + "&showHistory=true")
    status = DurableOrchestrationStatus.from_json(body)
    assert status.history is None


# --- list filters and paging (HandleGetStatusRequestAsync without an ID) -------------------------


def test_list_filters_by_status_prefix_and_created_time(sample: Sample) -> None:
    first = start(sample, "chain", ["a"], instance_id="list-a")
    finish(sample, first["id"])
    sample.host.clock.advance(timedelta(hours=1))
    start(sample, "suspendable", instance_id="list-b")
    start(sample, "suspendable", instance_id="other-c")
    later = (sample.host.clock.now() - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def ids(query: str) -> list[str]:
        status, body, _ = call(sample, "GET", f"/instances/?{query}")
        assert status == 200
        return [s["instanceId"] for s in body]

    assert ids("runtimeStatus=Completed") == ["list-a"]
    assert ids("runtimeStatus=Pending,Running&instanceIdPrefix=list") == ["list-b"]
    assert ids(f"createdTimeFrom={later}") == ["list-b", "other-c"]
    assert ids(f"createdTimeTo={later}") == ["list-a"]


def test_list_pages_with_top_and_continuation_tokens(sample: Sample) -> None:
    for n in range(5):
        start(sample, "suspendable", instance_id=f"page-{n}")
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        headers = {"x-ms-continuation-token": token} if token else {}
        status, body, returned = call(sample, "GET", "/instances/?top=2", headers=headers)
        assert status == 200 and len(body) <= 2
        seen += [s["instanceId"] for s in body]
        pages += 1
        token = returned["x-ms-continuation-token"]
        if not token:
            break
    assert pages == 3
    assert seen == [f"page-{n}" for n in range(5)]


def test_list_leaves_inputs_out_unless_show_input(sample: Sample) -> None:
    """OrchestrationStatusQueryCondition.ShowInput defaults to false."""
    start(sample, "chain", ["a"], instance_id="in-1")
    _, body, _ = call(sample, "GET", "/instances/")
    assert body[0]["input"] is None
    _, body, _ = call(sample, "GET", "/instances/?showInput=true")
    assert body[0]["input"] == ["a"]


# --- purge (HandleDeleteHistoryByIdRequestAsync, AzureTableTrackingStore.PurgeInstanceHistoryAsync)


def test_purge_deletes_an_instance_in_any_status(sample: Sample) -> None:
    """The Azure Storage provider purges by ID whatever the status, running included."""
    done = start(sample, "chain", ["a"])
    finish(sample, done["id"])
    running = start(sample, "suspendable")
    for urls in (done, running):
        status, body, _ = call(sample, "DELETE", urls["purgeHistoryDeleteUri"])
        assert (status, body) == (200, {"instancesDeleted": 1})
        assert call(sample, "GET", urls["statusQueryGetUri"])[0] == 404


def test_purge_of_an_unknown_instance_answers_404(sample: Sample) -> None:
    assert call(sample, "DELETE", "/instances/nobody")[0] == 404


def test_purge_by_filters_needs_created_time_from_and_keeps_running_ones(sample: Sample) -> None:
    """HandleDeleteHistoryWithFiltersRequestAsync; the tracking store keeps only the ended
    statuses of the filter; 404 when nothing was deleted."""
    status, _, _ = call(sample, "DELETE", "/instances/")
    assert status == 400
    done = start(sample, "chain", ["a"])
    finish(sample, done["id"])
    start(sample, "suspendable", instance_id="keep-me")
    since = "2000-01-01T00:00:00Z"
    status, body, _ = call(
        sample, "DELETE", f"/instances/?createdTimeFrom={since}&runtimeStatus=Completed,Running"
    )
    assert (status, body) == (200, {"instancesDeleted": 1})
    assert call(sample, "GET", "/instances/keep-me")[0] == 202
    status, _, _ = call(sample, "DELETE", f"/instances/?createdTimeFrom={since}&runtimeStatus=Completed")
    assert status == 404


# --- raise event (HandleRaiseEventRequestAsync) ------------------------------------------------


def test_raise_event_on_unknown_and_ended_instances(sample: Sample) -> None:
    """404 unknown; 410 Completed, Failed or Terminated."""
    assert call(sample, "POST", "/instances/nobody/raiseEvent/E", b"1", JSON)[0] == 404
    done = start(sample, "chain", ["a"])
    failed = start(sample, "crash")
    finish(sample, done["id"])
    finish(sample, failed["id"])
    for urls in (done, failed):
        url = urls["sendEventPostUri"].replace("{eventName}", "E")
        assert call(sample, "POST", url, b"1", JSON)[0] == 410


def test_raise_event_needs_json_content(sample: Sample) -> None:
    urls = start(sample, "approval")
    url = urls["sendEventPostUri"].replace("{eventName}", "ApprovalEvent")
    status, body, _ = call(sample, "POST", url, b"yes", {"Content-Type": "text/plain"})
    assert (status, body) == (400, {"Message": "Only application/json request content is supported"})
    status, body, _ = call(sample, "POST", url, b"{not json", JSON)
    assert status == 400 and body["Message"] == "Invalid JSON content"
    status, _, _ = call(sample, "POST", url, b"", JSON)
    assert status == 400  # JToken.Load of nothing is a JsonReaderException too
    assert sample.status(urls["id"])["runtimeStatus"] in ("Pending", "Running")


def test_a_raised_json_body_reaches_the_orchestrator_as_its_value(sample: Sample) -> None:
    urls = start(sample, "approval")
    url = urls["sendEventPostUri"].replace("{eventName}", "ApprovalEvent")
    assert call(sample, "POST", url, json.dumps({"by": "ann"}).encode(), JSON)[0] == 202
    finish(sample, urls["id"])
    assert sample.status(urls["id"])["output"] == {"approved": {"by": "ann"}}


# --- start with an ID in use (DurableClient.StartNewAsync, OverridableStates) -------------------


def test_start_with_the_id_of_a_running_instance_answers_500(sample: Sample) -> None:
    """NonRunningStates is the default: OrchestrationAlreadyExistsException, answered by the
    catch-all of HandleRequestAsync."""
    start(sample, "suspendable", instance_id="taken")
    status, body, _ = call(sample, "POST", "/orchestrators/suspendable/taken")
    assert status == 500
    assert body[
        "ExceptionMessage"
    ] == "An Orchestration instance with the status Running already exists." or (
        body["ExceptionMessage"] == "An Orchestration instance with the status Pending already exists."
    )


def test_start_with_the_id_of_an_ended_instance_replaces_it(sample: Sample) -> None:
    first = start(sample, "chain", ["a"], instance_id="again")
    finish(sample, first["id"])
    start(sample, "chain", ["b"], instance_id="again")
    finish(sample, "again")
    assert sample.status("again")["output"] == ["hello b"]


def test_start_of_an_unknown_orchestrator_answers_400(sample: Sample) -> None:
    """ThrowIfFunctionDoesNotExist: an ArgumentException, answered 400 with its message."""
    status, body, _ = call(sample, "POST", "/orchestrators/nothing")
    assert status == 400
    assert body["Message"] == "One or more of the arguments submitted is incorrect"
    assert body["ExceptionMessage"].startswith("The function 'nothing' doesn't exist")


def test_start_with_invalid_json_or_instance_id_answers_400(sample: Sample) -> None:
    status, body, _ = call(sample, "POST", "/orchestrators/chain", b"{nope")
    assert (status, body["Message"]) == (400, "Invalid JSON content")
    assert call(sample, "POST", "/orchestrators/chain/@entity")[0] == 400


def test_restart_starts_the_same_orchestrator_with_its_input(sample: Sample) -> None:
    """HandleRestartInstanceRequestAsync: a new instance ID unless restartWithNewInstanceId=false."""
    first = start(sample, "chain", ["r"])
    finish(sample, first["id"])
    status, body, _ = call(sample, "POST", first["restartPostUri"])
    assert status == 202 and body["id"] != first["id"]
    finish(sample, body["id"])
    assert sample.status(body["id"])["output"] == ["hello r"]
    status, body, _ = call(sample, "POST", first["restartPostUri"] + "&restartWithNewInstanceId=false")
    assert status == 202 and body["id"] == first["id"]
    assert call(sample, "POST", "/instances/nobody/restart")[0] == 400
