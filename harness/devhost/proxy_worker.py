"""devhost's proxy worker: the Python process the host starts for each Functions worker.

The platform runs a Python 3.13+ app the same way: the .NET host starts ``python -m
proxy_worker --host H --port P --workerId W --requestId R --grpcMaxMessageLength N``; the
worker connects back over gRPC (``FunctionRpc.EventStream``), announces itself with
``StartStream`` and hands every message the host sends to ``azure_functions_runtime``, the
worker library the app pins in ``requirements.txt``. This module is devhost's own version of
that proxy, written from the protocol and the library's API.

It runs in a clean interpreter with ``PYTHONPATH`` set by the host: the app's packages (built
from its ``requirements.txt`` alone) first, then this proxy and what it needs (grpcio,
protobuf, a fallback ``azure_functions_runtime``), as on Azure. The working directory is the
deployment package (``AzureWebJobsScriptRoot``). It imports nothing else of devhost but the
generated protocol module, which the host copies beside it.

Virtual time crosses the process boundary here: when the host runs on a virtual clock it names a
shared file (``DEVHOST_CLOCK_FILE``) that it rewrites on every move, and the app's own clock hook
(``DEVHOST_CLOCK_HOOK``, ``module:function``) is handed a clock that reads it.
"""

import argparse
import asyncio
import contextlib
import ctypes
import importlib
import logging
import mmap
import os
import signal
import struct
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import grpc

from harness.devhost.protocol import function_rpc_pb2 as rpc

EVENT_STREAM = "/AzureFunctionsRpcMessages.FunctionRpc/EventStream"
CLOCK_FILE = "DEVHOST_CLOCK_FILE"
CLOCK_HOOK = "DEVHOST_CLOCK_HOOK"
LOG_LEVEL = "DEVHOST_WORKER_LOG_LEVEL"
# seqlock layout: an even sequence number brackets a stable value (odd: a write in progress).
CLOCK_LAYOUT = struct.Struct("<Qq")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LEVELS = {
    logging.DEBUG: rpc.RpcLog.Debug,
    logging.INFO: rpc.RpcLog.Information,
    logging.WARNING: rpc.RpcLog.Warning,
    logging.ERROR: rpc.RpcLog.Error,
    logging.CRITICAL: rpc.RpcLog.Critical,
}


class SharedFileClock:
    """The host's virtual clock, read from the file it publishes: microseconds since the epoch."""

    virtual = True

    def __init__(self, path: Path) -> None:
        with path.open("rb") as file:
            self._map = mmap.mmap(file.fileno(), CLOCK_LAYOUT.size, access=mmap.ACCESS_READ)

    def now(self) -> datetime:
        while True:
            before, micros = CLOCK_LAYOUT.unpack_from(self._map)
            after = int.from_bytes(self._map[:8], "little")
            if before == after and before % 2 == 0:
                return EPOCH + timedelta(microseconds=micros)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The arguments the host passes, in both spellings hosts have used."""
    parser = argparse.ArgumentParser(prog="proxy_worker")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--workerId", "--functions-worker-id", dest="worker_id", required=True)
    parser.add_argument("--requestId", "--functions-request-id", dest="request_id", default="")
    parser.add_argument(
        "--grpcMaxMessageLength",
        "--functions-grpc-max-message-length",
        dest="max_message_length",
        type=int,
        default=2_147_483_647,
    )
    parser.add_argument("--functions-uri", dest="uri")
    args = parser.parse_args(argv)
    if args.uri:
        address = args.uri.split("//", 1)[-1].rstrip("/")
        args.host, _, port = address.rpartition(":")
        args.port = int(port)
    if args.port is None:
        parser.error("--port or --functions-uri is required")
    return args


def install_host_clock() -> None:
    """Hand the app the host's virtual clock through the app's own hook, if both exist."""
    path, hook = os.environ.get(CLOCK_FILE), os.environ.get(CLOCK_HOOK)
    if not path or not hook:
        return
    module_name, _, function = hook.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        return  # an app without the hook runs on its own clock
    getattr(module, function)(SharedFileClock(Path(path)))


class _Forward(logging.Handler):
    """Log records go back to the host as ``RpcLog`` messages, as the platform's worker sends them."""

    def __init__(self, send: Callable[[rpc.StreamingMessage], None]) -> None:
        super().__init__()
        self._send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
        except Exception:  # noqa: BLE001 - a broken log call must not fail the function
            message = str(record.msg)
        level = _LEVELS.get(record.levelno, rpc.RpcLog.Information)
        self._send(
            rpc.StreamingMessage(rpc_log=rpc.RpcLog(category=record.name, level=level, message=message))
        )


class ProxyWorker:
    def __init__(self, args: argparse.Namespace, runtime: ModuleType) -> None:
        self.args = args
        self.runtime = runtime
        self.outbound: asyncio.Queue[rpc.StreamingMessage | None] = asyncio.Queue()
        self.tasks: set[asyncio.Task[None]] = set()

    def send(self, message: rpc.StreamingMessage) -> None:
        self.outbound.put_nowait(message)

    async def _requests(self) -> AsyncIterator[rpc.StreamingMessage]:
        yield rpc.StreamingMessage(
            request_id=self.args.request_id, start_stream=rpc.StartStream(worker_id=self.args.worker_id)
        )
        while (message := await self.outbound.get()) is not None:
            yield message

    async def run(self) -> None:
        limit = self.args.max_message_length
        options = [("grpc.max_send_message_length", limit), ("grpc.max_receive_message_length", limit)]
        async with grpc.aio.insecure_channel(
            f"{self.args.host}:{self.args.port}", options=options
        ) as channel:
            call = channel.stream_stream(
                EVENT_STREAM,
                request_serializer=rpc.StreamingMessage.SerializeToString,
                response_deserializer=rpc.StreamingMessage.FromString,
            )
            stream = call(self._requests())
            stopping: asyncio.Task[None] | None = None
            async for message in stream:
                if message.WhichOneof("content") == "worker_terminate":
                    grace = message.worker_terminate.grace_period.ToTimedelta().total_seconds()
                    stopping = asyncio.create_task(self._stop(grace))
                    continue
                await self._dispatch(message)
            if stopping is not None:
                await stopping

    async def _stop(self, grace: float) -> None:
        """Respond to what is in flight within the grace period, then close this side of the stream;
        the host closes its side once it has read everything."""
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=grace or None)
        self.outbound.put_nowait(None)

    async def _dispatch(self, message: rpc.StreamingMessage) -> None:
        kind = message.WhichOneof("content")
        if kind == "invocation_request":
            # Invocations run side by side; the library runs sync functions on its thread pool.
            task = asyncio.create_task(self._invoke(message))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        elif kind == "worker_init_request":
            self._before_init(message.worker_init_request.function_app_directory)
            await self._respond(message, "worker_init_request", "worker_init_response", host=True)
        elif kind == "functions_metadata_request":
            await self._respond(message, "functions_metadata_request", "function_metadata_response")
        elif kind == "function_load_request":
            await self._respond(message, "function_load_request", "function_load_response")
        elif kind == "function_environment_reload_request":
            await self._respond(
                message,
                "function_environment_reload_request",
                "function_environment_reload_response",
                host=True,
            )

    def _before_init(self, app_directory: str) -> None:
        if app_directory and app_directory not in sys.path:
            sys.path.insert(0, app_directory)
        install_host_clock()
        self.runtime.start_threadpool_executor()

    async def _respond(
        self, message: rpc.StreamingMessage, handler: str, field: str, *, host: bool = False
    ) -> None:
        properties: dict[str, Any] = {"protos": rpc, "host": self.args.host} if host else {}
        response = await getattr(self.runtime, handler)(
            SimpleNamespace(name=handler, request=message, properties=properties)
        )
        self.send(rpc.StreamingMessage(request_id=message.request_id, **{field: response}))

    async def _invoke(self, message: rpc.StreamingMessage) -> None:
        request = SimpleNamespace(
            name="invocation_request",
            request=message,
            properties={"threadpool": self.runtime.get_threadpool_executor()},
        )
        try:
            response = await self.runtime.invocation_request(request)
        except Exception as error:  # noqa: BLE001 - the host must hear of every invocation
            response = rpc.InvocationResponse(
                invocation_id=message.invocation_request.invocation_id,
                result=rpc.StatusResult(
                    status=rpc.StatusResult.Failure,
                    exception=rpc.RpcException(message=f"{type(error).__name__}: {error}"),
                ),
            )
        self.send(rpc.StreamingMessage(request_id=message.request_id, invocation_response=response))


def die_with_the_host() -> None:
    """A worker never outlives its host, as on the platform, where both go with the instance: on
    Linux the kernel kills this process when the host does (``PR_SET_PDEATHSIG``)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the host died before the call took effect
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    die_with_the_host()
    # The app directory is the working directory (the deployment package), first on the path.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    runtime = importlib.import_module("azure_functions_runtime")
    loop = asyncio.new_event_loop()
    worker = ProxyWorker(args, runtime)

    def forward(message: rpc.StreamingMessage) -> None:
        if not loop.is_closed():  # records from threads still running at exit are dropped
            loop.call_soon_threadsafe(worker.send, message)

    handler = _Forward(forward)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get(LOG_LEVEL, "WARNING").upper())
    try:
        loop.run_until_complete(worker.run())
    except grpc.aio.AioRpcError as error:
        # The host went away (stopped or killed): nothing is left to respond to.
        print(
            f"proxy worker {args.worker_id}: the host closed the stream ({error.code().name})",
            file=sys.stderr,
        )
    finally:
        with contextlib.suppress(Exception):
            runtime.stop_threadpool_executor()
        root.handlers[:] = []
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
