"""HTTP triggers and the Durable HTTP API, behind Kestrel's request limits.

The Functions host refuses some requests in Kestrel, before any function runs; devhost does the
same with Kestrel's default limits. Requests are served whenever the event loop runs, so HTTP
needs no poller: the same server responds in virtual time and in real time.
"""

import functools
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence
from http import HTTPStatus

from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong

from harness.devhost import bindings, durable_api
from harness.devhost.durable_engine import DurableEngine
from harness.devhost.indexing import FunctionSpec
from harness.devhost.polling import Invoke
from harness.devhost.settings import SettingsError
from harness.devhost.worker import InvocationFailed

log = logging.getLogger("devhost")

# Kestrel's default request limits, which the Functions host enforces before any function runs:
# a longer request line is refused with 414, more or larger headers with 431.
MAX_REQUEST_LINE_SIZE = 8 * 1024
MAX_REQUEST_HEADERS_TOTAL_SIZE = 32 * 1024
MAX_REQUEST_HEADER_COUNT = 100
# devhost's own cap on a request body, not the platform's.
MAX_BODY_SIZE = 16 * 1024 * 1024


def listen(port: int) -> socket.socket:
    """The HTTP port on loopback, taken before anything slow starts, so a port in use is known at
    once (``OSError`` with ``EADDRINUSE``); 0 picks a free one."""
    return socket.create_server(("127.0.0.1", port))


class HttpTriggers:
    """The app's HTTP functions under the route prefix, and the Durable HTTP API, on loopback."""

    def __init__(
        self, specs: Sequence[FunctionSpec], prefix: str, engine: DurableEngine, invoke: Invoke
    ) -> None:
        self._invoke = invoke
        self._runner: web.AppRunner | None = None
        self.bound_port = 0
        app = web.Application(client_max_size=MAX_BODY_SIZE)
        for spec in specs:
            route = str(spec.trigger.get("route") or spec.name)
            path = "/" + "/".join(p for p in (prefix, _aiohttp_route(route, spec.name)) if p)
            methods = spec.trigger.get("methods") or ["*"]
            for method in methods:
                app.router.add_route(str(method).upper(), path, functools.partial(self._handle, spec))
        durable_api.register(app, engine, lambda: self.base_url)
        app.middlewares.append(_kestrel_limits)
        self._app = app

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.bound_port}"

    async def start(self, listener: socket.socket) -> None:
        """Serve on ``listener``, a socket from ``listen``."""
        self._runner = _AppRunner(
            self._app,
            access_log=None,
            # Refused by the parser, before any handler: a request line (the URL, to aiohttp's C
            # parser) over Kestrel's limit, a header line over the limit for all of them, too many
            # headers (its pure-Python parser counts the request line and the blank line too).
            # What gets past is measured as Kestrel measures it by _kestrel_limits.
            max_line_size=MAX_REQUEST_LINE_SIZE,
            max_field_size=MAX_REQUEST_HEADERS_TOTAL_SIZE,
            max_headers=MAX_REQUEST_HEADER_COUNT + 2,
        )
        await self._runner.setup()
        await web.SockSite(self._runner, listener).start()
        self.bound_port = listener.getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, spec: FunctionSpec, request: web.Request) -> web.StreamResponse:
        data, metadata = bindings.http_request(
            method=request.method,
            url=str(request.url),
            headers=request.headers,
            query=request.query,
            route_params=request.match_info,
            body=await request.read(),
        )
        try:
            response = await self._invoke(spec, data, metadata)
        except InvocationFailed as error:  # an unhandled function error is a 500, as in Azure
            log.error("function %s failed: %s\n%s", spec.name, error.message, error.stack_trace)
            return web.Response(status=500, text="Internal Server Error")
        reply = bindings.http_reply(response)
        return web.Response(status=reply.status, body=reply.body, headers=reply.headers)


def _refusal(error: BaseException | None) -> tuple[HTTPStatus, str] | None:
    """Kestrel's refusal of a request over its limits, as aiohttp's parser reports it; None for any
    other bad request. Which limit a ``LineTooLong`` hit tells the request line from a header."""
    if isinstance(error, LineTooLong):
        limit = error.args[1]
        if limit == MAX_REQUEST_LINE_SIZE:
            return HTTPStatus.REQUEST_URI_TOO_LONG, f"a request line over {limit} bytes"
        return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"a header line over {limit} bytes"
    if isinstance(error, BadHttpMessage) and error.message == "Too many headers received":
        return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "too many headers"
    return None


def _log_refusal(remote: str | None, status: HTTPStatus, why: str) -> None:
    # A client's mistake, not devhost's: one line, as Kestrel logs a bad request, no traceback.
    log.info("refused a request from %s: %d %s (%s)", remote, status.value, status.phrase, why)


class _HttpProtocol(web.RequestHandler):
    """aiohttp's connection handler, refusing a request over Kestrel's limits as Kestrel does:
    414 or 431 and a closed connection, where aiohttp responds 400 and logs a traceback."""

    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        refusal = _refusal(exc)
        if refusal is None:
            return super().handle_error(request, status, exc, message)
        _log_refusal(request.remote, *refusal)
        response = web.Response(status=refusal[0])
        response.force_close()
        return response


class _HttpServer(web.Server):
    def __call__(self) -> web.RequestHandler:
        # As aiohttp's own, with the handler class above.
        return _HttpProtocol(self, loop=self._loop, **self._kwargs)


class _AppRunner(web.AppRunner):
    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _HttpServer  # only __call__ differs: the state is aiohttp's own
        return server


@web.middleware
async def _kestrel_limits(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Kestrel's limits to the byte and the header, where aiohttp's parser counts differently:
    the request line with its CRLF (aiohttp's C parser counts the URL alone), every header line,
    ``name: value`` and CRLF, together (aiohttp counts each line on its own), and the headers."""
    target = request.raw_path.encode("utf-8", "surrogateescape")  # as aiohttp decoded the bytes
    line = len(request.method) + len(target) + len("  HTTP/1.1\r\n")
    headers = sum(len(name) + len(value) + len(": \r\n") for name, value in request.raw_headers)
    if line > MAX_REQUEST_LINE_SIZE:
        refusal = HTTPStatus.REQUEST_URI_TOO_LONG, f"a request line of {line} bytes"
    elif headers > MAX_REQUEST_HEADERS_TOTAL_SIZE:
        refusal = HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"{headers} bytes of headers"
    elif len(request.raw_headers) > MAX_REQUEST_HEADER_COUNT:
        refusal = HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"{len(request.raw_headers)} headers"
    else:
        return await handler(request)
    _log_refusal(request.remote, *refusal)
    response = web.Response(status=refusal[0])
    response.force_close()
    return response


def _aiohttp_route(route: str, function_name: str) -> str:
    """Functions route templates → aiohttp: ``{id}`` stays, ``{id:int}`` drops its constraint."""
    parts = []
    for segment in route.strip("/").split("/"):
        if not (segment.startswith("{") and segment.endswith("}")):
            parts.append(segment)
            continue
        name = segment[1:-1].split(":", 1)[0]
        if name.endswith("?") or name.startswith("*"):
            raise SettingsError(f"function {function_name}: route parameter {segment} is not supported")
        parts.append("{" + name + "}")
    return "/".join(parts)
