"""The host's side of the language-worker protocol: a gRPC server and the worker processes.

As the Functions host does it: devhost listens on loopback for ``FunctionRpc.EventStream``,
starts ``FUNCTIONS_WORKER_PROCESS_COUNT`` processes of ``harness.devhost.proxy_worker`` with the host's
arguments (``--host --port --workerId --requestId --grpcMaxMessageLength``) and the app's
settings, and waits for each to open its stream with ``StartStream``. Each then gets
``WorkerInitRequest``, ``FunctionsMetadataRequest`` and a ``FunctionLoadRequest`` per function;
invocations go to the worker with the fewest in flight.

A worker that exits is started again. What it had in flight fails with ``WorkerDied``, as the
host fails the invocations of a worker that died: the caller decides what that means (a
Service Bus message is abandoned, an activity fails, an orchestration episode is retried).
"""

import asyncio
import itertools
import logging
import os
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from harness.devhost.app_package import AppPackage
from harness.devhost.protocol import function_rpc_pb2 as rpc
from harness.devhost.proxy_worker import CLOCK_FILE, CLOCK_HOOK, EVENT_STREAM
from harness.devhost.worker import HOST_VERSION, InvocationFailed, LoadedFunction, WorkerError, check_status

log = logging.getLogger("harness.devhost.worker")

MAX_MESSAGE_LENGTH = 2_147_483_647  # what the host passes as --grpcMaxMessageLength
MAX_PROCESS_COUNT = 10  # FUNCTIONS_WORKER_PROCESS_COUNT's documented range is 1 to 10
START_TIMEOUT = 60.0  # a worker that has not opened its stream by then failed to start
_RPC_LEVELS = {
    rpc.RpcLog.Trace: logging.DEBUG,
    rpc.RpcLog.Debug: logging.DEBUG,
    rpc.RpcLog.Information: logging.INFO,
    rpc.RpcLog.Warning: logging.WARNING,
    rpc.RpcLog.Error: logging.ERROR,
    rpc.RpcLog.Critical: logging.CRITICAL,
}


class WorkerDied(InvocationFailed):
    """The worker process running the invocation exited before it responded."""

    def __init__(self, worker_id: str, code: int | None) -> None:
        super().__init__(rpc.RpcException(message=f"the worker process {worker_id} exited (code {code})"))


def process_count(env: Mapping[str, str]) -> int:
    text = env.get("FUNCTIONS_WORKER_PROCESS_COUNT", "1")
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_PROCESS_COUNT:
        raise WorkerError(f"FUNCTIONS_WORKER_PROCESS_COUNT must be 1 to {MAX_PROCESS_COUNT}, not {text!r}")
    return count


@dataclass
class _Channel:
    """One worker process and its stream: what the host's GrpcWorkerChannel holds."""

    worker_id: str
    process: asyncio.subprocess.Process
    outbound: asyncio.Queue[rpc.StreamingMessage | None] = field(default_factory=asyncio.Queue)
    pending: dict[str, asyncio.Future[rpc.StreamingMessage]] = field(default_factory=dict)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    ready: bool = False
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=40))


class WorkerProcesses:
    """``count`` worker processes running ``package``: the same calls as the in-process Worker."""

    def __init__(
        self,
        package: AppPackage,
        env: Mapping[str, str],
        *,
        count: int = 1,
        clock_file: Path | None = None,
        clock_hook: str = "adapters.clock:use_host_clock",
    ) -> None:
        self.package = package
        self.env = env
        self.count = count
        self.clock_file = clock_file
        self.clock_hook = clock_hook
        self.functions: list[LoadedFunction] = []
        self.restarts = 0
        self._channels: dict[str, _Channel] = {}
        self._server: grpc.aio.Server | None = None
        self._port = 0
        self._ids = itertools.count()
        self._id_prefix = str(uuid.uuid4())[:24]
        self._stopping = False
        self._ready = asyncio.Condition()
        self._watchers: set[asyncio.Task[None]] = set()
        # Called with the worker's PID and the function's ID once an invocation is on its way to
        # that worker: fault injection (a test that kills it with the invocation in flight).
        self.on_sent: list[Callable[[int, str], None]] = []

    def _next_id(self) -> str:
        return f"{self._id_prefix}{next(self._ids) % (1 << 48):012x}"

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> list[LoadedFunction]:
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_LENGTH),
            ("grpc.max_receive_message_length", -1),
        ]
        self._server = grpc.aio.server(options=options)
        handler = grpc.method_handlers_generic_handler(
            EVENT_STREAM.split("/")[1],
            {
                "EventStream": grpc.stream_stream_rpc_method_handler(
                    self._event_stream,
                    request_deserializer=rpc.StreamingMessage.FromString,
                    response_serializer=rpc.StreamingMessage.SerializeToString,
                )
            },
        )
        self._server.add_generic_rpc_handlers((handler,))
        self._port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        results = await asyncio.gather(*(self._launch() for _ in range(self.count)), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            await self.stop()  # what did start, and the server, go with the failed start
            raise failures[0]
        return self.functions

    async def stop(self) -> None:
        self._stopping = True
        for channel in list(self._channels.values()):
            channel.outbound.put_nowait(
                rpc.StreamingMessage(worker_terminate=rpc.WorkerTerminate(grace_period={"seconds": 5}))
            )
        for channel in list(self._channels.values()):
            try:
                await asyncio.wait_for(channel.process.wait(), timeout=10)
            except TimeoutError:
                channel.process.kill()
                await channel.process.wait()
        for task in list(self._watchers):
            task.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        if self._server is not None:
            await self._server.stop(grace=1)
            self._server = None

    @property
    def pids(self) -> list[int]:
        return [c.process.pid for c in self._channels.values() if c.ready]

    # --- the processes ------------------------------------------------------------------------

    def _process_env(self, worker_id: str) -> dict[str, str]:
        env = {k: v for k, v in self.env.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
        env.update(
            {
                "PYTHONPATH": os.pathsep.join(str(p) for p in self.package.path),
                "PYTHONNOUSERSITE": "1",
                "PYTHONUNBUFFERED": "1",
                "AzureWebJobsScriptRoot": str(self.package.wwwroot),
                "FUNCTIONS_WORKER_RUNTIME": "python",
                "FUNCTIONS_WORKER_PROCESS_COUNT": str(self.count),
                "WEBSITE_HOSTNAME": env.get("WEBSITE_HOSTNAME", "localhost"),
                "DEVHOST_WORKER_ID": worker_id,
            }
        )
        if self.clock_file is not None:
            env[CLOCK_FILE] = str(self.clock_file)
            env[CLOCK_HOOK] = self.clock_hook
        return env

    async def _launch(self) -> None:
        worker_id = str(uuid.uuid4())
        process = await asyncio.create_subprocess_exec(
            str(self.package.python),
            "-m",
            "harness.devhost.proxy_worker",
            "--host", "127.0.0.1",
            "--port", str(self._port),
            "--workerId", worker_id,
            "--requestId", str(uuid.uuid4()),
            "--grpcMaxMessageLength", str(MAX_MESSAGE_LENGTH),
            cwd=self.package.wwwroot,
            env=self._process_env(worker_id),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        channel = _Channel(worker_id, process)
        self._channels[worker_id] = channel
        self._watch(self._relay(channel, process.stdout, logging.INFO))
        self._watch(self._relay(channel, process.stderr, logging.WARNING))
        exited = asyncio.ensure_future(process.wait())
        connected = asyncio.ensure_future(channel.connected.wait())
        done, _ = await asyncio.wait(
            {exited, connected}, timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        if connected not in done:
            connected.cancel()
            if exited not in done:
                process.kill()
                await process.wait()
            exited.cancel()
            del self._channels[worker_id]
            await asyncio.sleep(0)  # let the relays read what is left
            raise WorkerError(
                f"the worker process did not connect (exit code {process.returncode}):\n"
                + "\n".join(channel.stderr)
            )
        exited.cancel()
        self._watch(self._await_exit(channel))
        try:
            functions = await self._initialise(channel)
        except WorkerError:
            process.kill()
            raise
        if self.functions and [f.name for f in functions] != [f.name for f in self.functions]:
            raise WorkerError("a worker process indexed other functions than the first")
        self.functions = functions
        async with self._ready:
            channel.ready = True
            self._ready.notify_all()

    def _watch(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _relay(self, channel: _Channel, stream: asyncio.StreamReader | None, level: int) -> None:
        """What a worker prints, into devhost's log, as the host logs a worker's console."""
        if stream is None:
            return
        while line := await stream.readline():
            text = line.decode(errors="replace").rstrip()
            if level >= logging.WARNING:
                channel.stderr.append(text)
            log.log(level, "worker %s: %s", channel.worker_id[:8], text)

    async def _await_exit(self, channel: _Channel) -> None:
        code = await channel.process.wait()
        self._channels.pop(channel.worker_id, None)
        channel.ready = False
        for future in channel.pending.values():
            if not future.done():
                future.set_exception(WorkerDied(channel.worker_id, code))
        channel.pending.clear()
        channel.outbound.put_nowait(None)
        if self._stopping:
            return
        log.warning("worker process %s exited with code %s: starting another", channel.process.pid, code)
        self.restarts += 1
        try:
            await self._launch()
        except WorkerError as error:
            log.error("devhost could not restart a worker process: %s", error)

    async def _initialise(self, channel: _Channel) -> list[LoadedFunction]:
        app_dir = str(self.package.wwwroot)
        init = await self._request(
            channel,
            rpc.StreamingMessage(
                worker_init_request=rpc.WorkerInitRequest(
                    host_version=HOST_VERSION,
                    function_app_directory=app_dir,
                    worker_directory=str(self.package.path[-1]),
                )
            ),
        )
        check_status(init.worker_init_response.result, f"to load the app in {app_dir}")
        metadata = (
            await self._request(
                channel,
                rpc.StreamingMessage(
                    functions_metadata_request=rpc.FunctionsMetadataRequest(function_app_directory=app_dir)
                ),
            )
        ).function_metadata_response
        check_status(metadata.result, "to index the app")
        if metadata.use_default_metadata_indexing or not metadata.function_metadata_results:
            raise WorkerError(
                f"the Functions worker found no functions: is there a function_app.py in {app_dir}?"
            )
        functions = []
        for function in metadata.function_metadata_results:
            loaded = await self._request(
                channel,
                rpc.StreamingMessage(
                    function_load_request=rpc.FunctionLoadRequest(
                        function_id=function.function_id, metadata=function
                    )
                ),
            )
            check_status(loaded.function_load_response.result, f"to load {function.name}")
            functions.append(
                LoadedFunction(function.function_id, function.name, tuple(function.raw_bindings))
            )
        return functions

    def _send(
        self, channel: _Channel, message: rpc.StreamingMessage, key: str | None = None
    ) -> asyncio.Future[rpc.StreamingMessage]:
        """Queue ``message`` on the worker's stream; the future is the worker's response to it,
        matched by ``key``."""
        message.request_id = self._next_id()
        future: asyncio.Future[rpc.StreamingMessage] = asyncio.get_running_loop().create_future()
        channel.pending[key or message.request_id] = future
        channel.outbound.put_nowait(message)
        return future

    async def _request(self, channel: _Channel, message: rpc.StreamingMessage) -> rpc.StreamingMessage:
        return await self._send(channel, message)

    # --- the stream ---------------------------------------------------------------------------

    async def _event_stream(
        self,
        requests: AsyncIterator[rpc.StreamingMessage],
        context: grpc.aio.ServicerContext[rpc.StreamingMessage, rpc.StreamingMessage],
    ) -> AsyncIterator[rpc.StreamingMessage]:
        first = await anext(aiter(requests), None)
        channel = None if first is None else self._channels.get(first.start_stream.worker_id)
        if channel is None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "not a worker this host started")
            return
        reader = asyncio.ensure_future(self._read(channel, requests))
        channel.connected.set()
        try:
            while (message := await channel.outbound.get()) is not None:
                yield message
        finally:
            reader.cancel()

    async def _read(self, channel: _Channel, requests: AsyncIterator[rpc.StreamingMessage]) -> None:
        async for message in requests:
            kind = message.WhichOneof("content")
            if kind == "rpc_log":
                entry = message.rpc_log
                # The invocation's ID, as the Functions host logs it, ties the line to its reply.
                where = f" (invocation {entry.invocation_id})" if entry.invocation_id else ""
                level = _RPC_LEVELS.get(entry.level, logging.INFO)
                log.log(level, "%s%s: %s", entry.category, where, entry.message)
                continue
            key = (
                message.invocation_response.invocation_id
                if kind == "invocation_response"
                else message.request_id
            )
            future = channel.pending.pop(key, None)
            if future is not None and not future.done():
                future.set_result(message)
        channel.outbound.put_nowait(None)  # the worker closed its side: close ours

    # --- invocations --------------------------------------------------------------------------

    async def _channel(self) -> _Channel:
        async with self._ready:
            await asyncio.wait_for(
                self._ready.wait_for(lambda: any(c.ready for c in self._channels.values())), START_TIMEOUT
            )
            return min((c for c in self._channels.values() if c.ready), key=lambda c: len(c.pending))

    async def invoke(
        self,
        function_id: str,
        inputs: Sequence[rpc.ParameterBinding],
        trigger_metadata: Mapping[str, rpc.TypedData] | None = None,
    ) -> rpc.InvocationResponse:
        try:
            channel = await self._channel()
        except TimeoutError:
            raise InvocationFailed(rpc.RpcException(message="no worker process is running")) from None
        invocation_id = self._next_id()
        message = rpc.StreamingMessage(
            invocation_request=rpc.InvocationRequest(
                invocation_id=invocation_id,
                function_id=function_id,
                input_data=inputs,
                trigger_metadata=trigger_metadata or {},
            )
        )
        sent = self._send(channel, message, key=invocation_id)
        for observer in self.on_sent:
            observer(channel.process.pid, function_id)
        response = (await sent).invocation_response
        if response.result.status != rpc.StatusResult.Success:
            raise InvocationFailed(response.result.exception)
        return response
