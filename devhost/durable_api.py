"""devhost's implementation of the Durable Functions HTTP API (the ``rpcBaseUrl`` endpoints).

The SDK's ``DurableOrchestrationClient`` calls these over loopback, so status codes decide
its behaviour exactly as in Azure: ``raise_event`` on a finished instance gets 410, on an
unknown one 404, and the SDK raises.

It needs only the engine, and the host's base URL once the host listens: ``client_binding`` is
the Durable client binding's JSON, which points the SDK's client at these endpoints.
"""

import functools
import json
from collections.abc import Callable

from aiohttp import web

from devhost.durable_engine import Delivery, DurableEngine, InstanceExists, UnknownOrchestrator
from devhost.durable_wire import RuntimeStatus

BASE = "/runtime/webhooks/durabletask"
_STATUS_CODES = {
    RuntimeStatus.PENDING: 202,
    RuntimeStatus.RUNNING: 202,
    RuntimeStatus.COMPLETED: 200,
    RuntimeStatus.FAILED: 500,
    RuntimeStatus.TERMINATED: 400,
}


def register(app: web.Application, engine: DurableEngine, base_url: Callable[[], str]) -> None:
    """The Durable HTTP API's routes on ``app``; ``base_url`` is read per request (the port is
    known only once the host listens)."""
    api = _Api(engine, base_url)
    app.router.add_post(BASE + "/orchestrators/{name}", api.start)
    app.router.add_post(BASE + "/orchestrators/{name}/{instance_id}", api.start)
    app.router.add_post(BASE + "/instances/{instance_id}/raiseEvent/{event}", api.raise_event)
    app.router.add_post(BASE + "/instances/{instance_id}/terminate", api.terminate)
    app.router.add_get(BASE + "/instances/", api.list_instances)
    app.router.add_get(BASE + "/instances/{instance_id}", api.status)
    app.router.add_delete(BASE + "/instances/{instance_id}", api.purge)


async def _json_text(request: web.Request) -> str | None:
    """The SDK sends its JSON text JSON-encoded once more; accept a plain JSON body too."""
    raw = await request.read()
    if not raw:
        return None
    value = json.loads(raw)
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


@functools.cache
def client_binding(base_url: str) -> str:
    """The Durable client binding's JSON for a host at ``base_url``: the SDK's own client talks to
    the endpoints above with it."""
    rpc = f"{base_url}{BASE}/"
    status = f"{rpc}instances/INSTANCEID"
    return json.dumps(
        {
            "taskHubName": "devhost",
            "creationUrls": {
                "createNewInstancePostUri": f"{rpc}orchestrators/{{functionName}}[/{{instanceId}}]",
            },
            "managementUrls": {
                "id": "INSTANCEID",
                "statusQueryGetUri": status,
                "sendEventPostUri": f"{status}/raiseEvent/{{eventName}}",
                "terminatePostUri": f"{status}/terminate?reason={{text}}",
                "purgeHistoryDeleteUri": status,
                "rewindPostUri": f"{status}/rewind?reason={{text}}",
                "restartPostUri": f"{status}/restart",
                "suspendPostUri": f"{status}/suspend?reason={{text}}",
                "resumePostUri": f"{status}/resume?reason={{text}}",
            },
            "baseUrl": rpc,
            "requiredQueryStringParameters": "",
            "rpcBaseUrl": rpc,
            "httpBaseUrl": rpc,
        }
    )


class _Api:
    def __init__(self, engine: DurableEngine, base_url: Callable[[], str]) -> None:
        self.engine = engine
        self.base_url = base_url

    def _management_urls(self) -> dict[str, str]:
        urls: dict[str, str] = json.loads(client_binding(self.base_url()))["managementUrls"]
        return urls

    async def start(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            instance_id = self.engine.start(
                name, request.match_info.get("instance_id"), await _json_text(request)
            )
        except UnknownOrchestrator as error:
            return web.json_response({"ExceptionMessage": str(error)}, status=400)
        except InstanceExists as error:
            return web.json_response(str(error), status=409)
        body = {k: v.replace("INSTANCEID", instance_id) for k, v in self._management_urls().items()}
        return web.json_response(body, status=202)

    async def raise_event(self, request: web.Request) -> web.Response:
        outcome = self.engine.raise_event(
            request.match_info["instance_id"], request.match_info["event"], await _json_text(request)
        )
        code = {Delivery.ACCEPTED: 202, Delivery.NOT_FOUND: 404, Delivery.GONE: 410}[outcome]
        return web.json_response(None, status=code)

    async def terminate(self, request: web.Request) -> web.Response:
        outcome = self.engine.terminate(request.match_info["instance_id"], request.query.get("reason", ""))
        code = {Delivery.ACCEPTED: 202, Delivery.NOT_FOUND: 404, Delivery.GONE: 410}[outcome]
        return web.json_response(None, status=code)

    async def status(self, request: web.Request) -> web.Response:
        instance_id = request.match_info["instance_id"]
        status = self.engine.status(
            instance_id,
            show_history=request.query.get("showHistory", "").lower() == "true",
            show_input=request.query.get("showInput", "true").lower() != "false",
        )
        if status is None:
            return web.json_response(f"No instance with ID '{instance_id}' found.", status=404)
        return web.json_response(status, status=_STATUS_CODES[RuntimeStatus(status["runtimeStatus"])])

    async def list_instances(self, request: web.Request) -> web.Response:
        statuses = {s for s in request.query.get("runtimeStatus", "").split(",") if s}
        return web.json_response(
            self.engine.list_instances(statuses or None, request.query.get("instanceIdPrefix"))
        )

    async def purge(self, request: web.Request) -> web.Response:
        deleted = self.engine.purge(request.match_info["instance_id"])
        if not deleted:
            return web.json_response(None, status=404)
        return web.json_response({"instancesDeleted": deleted}, status=200)
