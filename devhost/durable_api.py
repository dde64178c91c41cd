"""devhost's implementation of the Durable Functions HTTP API (the ``rpcBaseUrl`` endpoints).

The SDK's ``DurableOrchestrationClient`` calls these over loopback, so status codes decide
its behaviour exactly as in Azure: ``raise_event`` on a finished instance gets 410, on an
unknown one 404, and the SDK raises.
"""

import json
from typing import TYPE_CHECKING

from aiohttp import web

from devhost.durable import Delivery, InstanceExists, RuntimeStatus, UnknownOrchestrator

if TYPE_CHECKING:
    from devhost.host import Host

BASE = "/runtime/webhooks/durabletask"
_STATUS_CODES = {
    RuntimeStatus.PENDING: 202,
    RuntimeStatus.RUNNING: 202,
    RuntimeStatus.COMPLETED: 200,
    RuntimeStatus.FAILED: 500,
    RuntimeStatus.TERMINATED: 400,
}


def register(app: web.Application, host: "Host") -> None:
    api = _Api(host)
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


class _Api:
    def __init__(self, host: "Host") -> None:
        self.host = host

    def _management_urls(self) -> dict[str, str]:
        urls: dict[str, str] = json.loads(self.host.client_json())["managementUrls"]
        return urls

    async def start(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            instance_id = self.host.engine.start(
                name, request.match_info.get("instance_id"), await _json_text(request)
            )
        except UnknownOrchestrator as error:
            return web.json_response({"ExceptionMessage": str(error)}, status=400)
        except InstanceExists as error:
            return web.json_response(str(error), status=409)
        body = {k: v.replace("INSTANCEID", instance_id) for k, v in self._management_urls().items()}
        return web.json_response(body, status=202)

    async def raise_event(self, request: web.Request) -> web.Response:
        outcome = self.host.engine.raise_event(
            request.match_info["instance_id"], request.match_info["event"], await _json_text(request)
        )
        code = {Delivery.ACCEPTED: 202, Delivery.NOT_FOUND: 404, Delivery.GONE: 410}[outcome]
        return web.json_response(None, status=code)

    async def terminate(self, request: web.Request) -> web.Response:
        outcome = self.host.engine.terminate(
            request.match_info["instance_id"], request.query.get("reason", "")
        )
        code = {Delivery.ACCEPTED: 202, Delivery.NOT_FOUND: 404, Delivery.GONE: 410}[outcome]
        return web.json_response(None, status=code)

    async def status(self, request: web.Request) -> web.Response:
        instance_id = request.match_info["instance_id"]
        status = self.host.engine.status(
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
            self.host.engine.list_instances(statuses or None, request.query.get("instanceIdPrefix"))
        )

    async def purge(self, request: web.Request) -> web.Response:
        deleted = self.host.engine.purge(request.match_info["instance_id"])
        if not deleted:
            return web.json_response(None, status=404)
        return web.json_response({"instancesDeleted": deleted}, status=200)
