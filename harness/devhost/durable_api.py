"""devhost's implementation of the Durable Functions HTTP API (the ``rpcBaseUrl`` endpoints).

The SDK's ``DurableOrchestrationClient`` calls these over loopback, so the status codes and
bodies decide its behaviour exactly as in Azure. Each handler follows the extension's
``HttpApiHandler.cs`` (Azure/azure-functions-durable-extension, src/WebJobs.Extensions.DurableTask):
the same routes, the same checks in the same order, the same codes, and its error bodies
(``HttpRequestMessageExtensions.CreateErrorResponse``: ``Message``, and with an exception its
``ExceptionMessage``, ``ExceptionType`` and ``StackTrace``).

What devhost does not implement (suspend, resume, rewind, entities) is refused with 501 and a
message that says so, after the extension's own 404/410 checks, and is not advertised in the
management URLs.

It needs only the engine, and the host's base URL once the host listens: ``client_binding`` is
the Durable client binding's JSON, which points the SDK's client at these endpoints.
"""

import functools
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from aiohttp import web

from harness.devhost.durable_engine import (
    DurableEngine,
    InstanceExists,
    InvalidInstanceId,
    ListQuery,
    OperationOutcome,
    UnknownOrchestrator,
)
from harness.devhost.durable_wire import FINISHED, RuntimeStatus

BASE = "/runtime/webhooks/durabletask"
TASK_HUB = "devhost"
# The Azure Storage provider's default connection name (ConnectionStringNames.Storage): the
# extension puts it in every management URL's query string.
CONNECTION = "Storage"
CONTINUATION_HEADER = "x-ms-continuation-token"
# The extension's status endpoint asks pollers to wait this long; its check-status response 10 s.
STATUS_RETRY_AFTER = "5"
START_RETRY_AFTER = "10"
_OUTCOME_STATUS = {
    OperationOutcome.ACCEPTED: 202,
    OperationOutcome.NOT_FOUND: 404,
    OperationOutcome.GONE: 410,
}
UNSUPPORTED = {
    "suspend": "suspend and resume",
    "resume": "suspend and resume",
    "rewind": "rewind",
}


def register(app: web.Application, engine: DurableEngine, base_url: Callable[[], str]) -> None:
    """The Durable HTTP API's routes on ``app``; ``base_url`` is read per request (the port is
    known only once the host listens)."""
    api = _Api(engine, base_url)
    # The extension responds 404, not 405, to a method a route does not take: every route here
    # takes any method and dispatches as HandleRequestAsync does.
    routes: list[tuple[str, Callable[[web.Request], Awaitable[web.Response]]]] = [
        ("/orchestrators/{name}", api.start),
        ("/orchestrators/{name}/{instance_id}", api.start),
        ("/instances/{instance_id}/raiseEvent/{event}", api.raise_event),
        ("/instances/{instance_id}/{operation}", api.operation),
        ("/instances", api.instances),
        ("/instances/", api.instances),
        ("/instances/{instance_id}", api.instance),
        ("/entities/{tail:.*}", api.entities),
    ]
    for path, handler in routes:
        app.router.add_route("*", BASE + path, handler)


def _query_suffix() -> str:
    """``taskHub=…&connection=…``, as ``GetClientResponseLinks`` ends every management URL (no
    ``code``: devhost has no system key, as ``func start`` has none)."""
    return f"taskHub={quote(TASK_HUB)}&connection={quote(CONNECTION)}"


def management_urls(base_url: str, instance_id: str) -> dict[str, str]:
    """The management URLs of one instance, as ``HttpApiHandler.GetClientResponseLinks`` builds
    them, less the operations devhost refuses (suspend, resume, rewind)."""
    prefix = f"{base_url}{BASE}/instances/{quote(instance_id, safe='')}"
    suffix = _query_suffix()
    return {
        "id": instance_id,
        "statusQueryGetUri": f"{prefix}?{suffix}",
        "sendEventPostUri": f"{prefix}/raiseEvent/{{eventName}}?{suffix}",
        "terminatePostUri": f"{prefix}/terminate?reason={{text}}&{suffix}",
        "purgeHistoryDeleteUri": f"{prefix}?{suffix}",
        "restartPostUri": f"{prefix}/restart?{suffix}",
    }


@functools.cache
def client_binding(base_url: str) -> str:
    """The Durable client binding's JSON for a host at ``base_url`` (``BindingHelper.cs``,
    ``OrchestrationClientInputData``): the SDK's own client talks to the endpoints above with it."""
    base = f"{base_url}{BASE}"
    creation = f"{base}/orchestrators/{{functionName}}[/{{instanceId}}]"
    return json.dumps(
        {
            "taskHubName": TASK_HUB,
            "creationUrls": {
                "createNewInstancePostUri": f"{creation}?",
                "createAndWaitOnNewInstancePostUri": (
                    f"{creation}?timeout={{timeoutInSeconds}}&pollingInterval={{intervalInSeconds}}&"
                ),
            },
            # The placeholder the extension uses (InstanceIdPlaceholder); the SDK replaces it.
            "managementUrls": management_urls(base_url, "INSTANCEID"),
            "baseUrl": base,
            "requiredQueryStringParameters": "",
            "rpcBaseUrl": f"{base}/",
        }
    )


def _error(status: int, message: str, exception: tuple[str, str] | None = None) -> web.Response:
    """``CreateErrorResponse``: ``{"Message"}``, with an exception's message and type if given."""
    body: dict[str, Any] = {"Message": message}
    if exception is not None:
        body |= {"ExceptionMessage": exception[0], "ExceptionType": exception[1], "StackTrace": None}
    return web.json_response(body, status=status)


def _bool(request: web.Request, name: str, default: bool) -> bool:
    """.NET's ``bool.TryParse`` on a query parameter (names case-insensitive, as
    ``GetQueryNameValuePairs``): ``true``/``false`` in any case, else the default."""
    value = _param(request, name)
    text = (value or "").strip().lower()
    return {"true": True, "false": False}.get(text, default)


def _param(request: web.Request, name: str) -> str | None:
    lowered = name.lower()
    return next((v for k, v in request.query.items() if k.lower() == lowered), None)


def _time(request: web.Request, name: str) -> datetime | None:
    """``DateTime.TryParse`` on ISO 8601 text; a value that does not parse is ignored, as there."""
    value = _param(request, name)
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _int(request: web.Request, name: str) -> int | None:
    value = _param(request, name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _statuses(request: web.Request) -> set[str]:
    """``runtimeStatus``: comma-separated, repeatable; names that are not statuses are dropped
    (``Enum.TryParse``)."""
    lowered = "runtimestatus"
    values = [v for k, v in request.query.items() if k.lower() == lowered]
    known = {s.value.lower(): s.value for s in RuntimeStatus}
    return {known[p.strip().lower()] for v in values for p in v.split(",") if p.strip().lower() in known}


class _Api:
    def __init__(self, engine: DurableEngine, base_url: Callable[[], str]) -> None:
        self.engine = engine
        self.base_url = base_url

    def _check_status_response(self, instance_id: str) -> web.Response:
        """``CreateCheckStatusResponseMessage``: 202, the URLs, ``Location`` and ``Retry-After``."""
        urls = management_urls(self.base_url(), instance_id)
        response = web.json_response(urls, status=202)
        response.headers["Location"] = urls["statusQueryGetUri"]
        response.headers["Retry-After"] = START_RETRY_AFTER
        return response

    def _start(self, name: str, instance_id: str | None, input_json: str | None) -> web.Response:
        try:
            started = self.engine.start(name, instance_id, input_json)
        except (UnknownOrchestrator, InvalidInstanceId) as error:
            return _error(
                400,
                "One or more of the arguments submitted is incorrect",
                (str(error), "System.ArgumentException"),
            )
        except InstanceExists as error:
            # DurableTask.AzureStorage throws OrchestrationAlreadyExistsException, which
            # HandleRequestAsync's catch-all responds with 500.
            return _error(
                500,
                "Something went wrong while processing your request",
                (str(error), "DurableTask.Core.Exceptions.OrchestrationAlreadyExistsException"),
            )
        return self._check_status_response(started)

    async def start(self, request: web.Request) -> web.Response:
        if request.method != "POST":
            return web.Response(status=404)
        raw = await request.read()
        try:
            input_json = _start_input(raw)
        except ValueError as error:
            return _error(400, "Invalid JSON content", (str(error), "Newtonsoft.Json.JsonReaderException"))
        return self._start(request.match_info["name"], request.match_info.get("instance_id"), input_json)

    async def raise_event(self, request: web.Request) -> web.Response:
        if request.method != "POST":
            return web.Response(status=404)
        instance_id = request.match_info["instance_id"]
        found = self.engine.status(instance_id)
        if found is None:
            return web.Response(status=404)
        if RuntimeStatus(found["runtimeStatus"]) in FINISHED:
            return web.Response(status=410)
        if request.content_type.lower() != "application/json":
            return _error(400, "Only application/json request content is supported")
        text = (await request.read()).decode("utf-8", errors="replace")
        try:
            token = json.loads(text)
        except ValueError as error:
            return _error(400, "Invalid JSON content", (str(error), "Newtonsoft.Json.JsonReaderException"))
        # The extension stores the parsed token re-serialised compactly (JToken.ToString with
        # Formatting.None); the orchestrator gets that text, whatever the client meant by it.
        outcome = self.engine.raise_event(instance_id, request.match_info["event"], _compact(token))
        return web.Response(status=_OUTCOME_STATUS[outcome])

    async def operation(self, request: web.Request) -> web.Response:
        instance_id = request.match_info["instance_id"]
        operation = request.match_info["operation"].lower()
        if request.method != "POST":
            return web.Response(status=404)
        if operation == "terminate":
            outcome = self.engine.terminate(instance_id, _param(request, "reason"))
            return web.Response(status=_OUTCOME_STATUS[outcome])
        if operation == "restart":
            return self._restart(request, instance_id)
        if operation in UNSUPPORTED:
            return self._refuse(instance_id, operation)
        return web.Response(status=404)

    def _refuse(self, instance_id: str, operation: str) -> web.Response:
        """The extension's own checks first (404 unknown, 410 ended; a rewind is for Failed
        instances), then devhost's refusal."""
        found = self.engine.status(instance_id)
        if found is None:
            return web.Response(status=404)
        status = RuntimeStatus(found["runtimeStatus"])
        if status in FINISHED and (operation != "rewind" or status != RuntimeStatus.FAILED):
            return web.Response(status=410)
        what = UNSUPPORTED[operation]
        return _error(501, f"devhost does not support {what} of orchestration instances")

    def _restart(self, request: web.Request, instance_id: str) -> web.Response:
        found = self.engine.status(instance_id, show_input=True)
        if found is None:
            return _error(
                400,
                "InstanceId does not match a valid orchestration instance.",
                (
                    f"An orchestrastion with the instanceId {instance_id} was not found.",
                    "System.ArgumentException",
                ),
            )
        new_id = _bool(request, "restartWithNewInstanceId", True)
        stored_input = self.engine.stored_input(instance_id)
        return self._start(found["name"], None if new_id else instance_id, stored_input)

    async def instances(self, request: web.Request) -> web.Response:
        if request.method == "GET":
            return await self.list_instances(request)
        if request.method == "DELETE":
            return await self.purge_with_filters(request)
        return web.Response(status=404)

    async def instance(self, request: web.Request) -> web.Response:
        if request.method == "GET":
            return await self.status(request)
        if request.method == "DELETE":
            return await self.purge(request)
        return web.Response(status=404)

    async def status(self, request: web.Request) -> web.Response:
        instance_id = request.match_info["instance_id"]
        status = self.engine.status(
            instance_id,
            show_history=_bool(request, "showHistory", False),
            show_history_output=_bool(request, "showHistoryOutput", False),
            show_input=_bool(request, "showInput", True),
        )
        if status is None:
            return web.Response(status=404)
        runtime = RuntimeStatus(status["runtimeStatus"])
        if runtime in (RuntimeStatus.PENDING, RuntimeStatus.RUNNING):
            response = web.json_response(_payload(status), status=202)
            response.headers["Location"] = str(request.url)
            response.headers["Retry-After"] = STATUS_RETRY_AFTER
            return response
        failing = runtime == RuntimeStatus.FAILED and _bool(
            request, "returnInternalServerErrorOnFailure", False
        )
        return web.json_response(_payload(status), status=500 if failing else 200)

    async def list_instances(self, request: web.Request) -> web.Response:
        query = ListQuery(
            statuses=_statuses(request) or None,
            prefix=_param(request, "instanceIdPrefix"),
            created_from=_time(request, "createdTimeFrom"),
            created_to=_time(request, "createdTimeTo"),
            show_input=_bool(request, "showInput", False),
            top=_int(request, "top"),
            continuation=request.headers.get(CONTINUATION_HEADER) or None,
        )
        page, token = self.engine.list_page(query)
        response = web.json_response([_payload(s) for s in page])
        # The extension always sends the header; with no more pages it is empty (a null token).
        response.headers[CONTINUATION_HEADER] = token or ""
        return response

    async def purge(self, request: web.Request) -> web.Response:
        instance_id = request.match_info["instance_id"]
        if self.engine.status(instance_id) is None:
            return web.Response(status=404)
        return web.json_response({"instancesDeleted": self.engine.purge(instance_id)})

    async def purge_with_filters(self, request: web.Request) -> web.Response:
        created_from = _time(request, "createdTimeFrom")
        if created_from is None:
            return web.json_response("Please provide value for 'createdTimeFrom' parameter.", status=400)
        created_to = _time(request, "createdTimeTo") or self.engine.clock.now()
        deleted = self.engine.purge_by_filters(created_from, created_to, _statuses(request) or None)
        if deleted == 0:
            return web.Response(status=404)
        return web.json_response({"instancesDeleted": deleted})

    async def entities(self, request: web.Request) -> web.Response:
        return _error(501, "devhost does not support Durable Entities")


def _start_input(raw: bytes) -> str | None:
    """A start request's input as JSON text. The SDK sends its JSON text JSON-encoded once more
    (the extension deserialises it to a string, and hands the orchestrator that string's JSON);
    a plain JSON body is taken as the input itself. A body that is not JSON raises ValueError."""
    if not raw:
        return None
    value = json.loads(raw)
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


def _compact(token: object) -> str:
    return json.dumps(token, separators=(",", ":"), ensure_ascii=False)


def _payload(status: dict[str, Any]) -> dict[str, Any]:
    """``StatusResponsePayload``: times as ``ToString("s") + "Z"`` (whole seconds), and
    ``historyEvents`` only when asked for and there is a history."""
    payload = {k: v for k, v in status.items() if k != "historyEvents"}
    for key in ("createdTime", "lastUpdatedTime"):
        payload[key] = str(status[key])[:19] + "Z"
    if status.get("historyEvents") is not None:
        payload["historyEvents"] = status["historyEvents"]
    return payload
