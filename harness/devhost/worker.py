"""The real Functions Python worker (``azure-functions-runtime``), hosted in devhost's process.

From Python 3.13 the platform runs the worker version the app pins in ``requirements.txt``: a
small proxy worker speaks gRPC to the .NET host and hands each message to this library's four
coroutines. devhost makes the same calls with the same protocol messages
(``harness/devhost/protocol/function_rpc.proto``), so indexing, binding conversion, the threads sync
functions run on, exceptions and return values are the worker's own. devhost plays only the
host: what goes into an ``InvocationRequest`` and what it makes of the ``InvocationResponse``.

Every message crosses a serialise/parse round trip, as over gRPC: the worker sees exactly what
protobuf would deliver (unset fields, defaults), not the objects devhost built.
"""

import asyncio
import itertools
import json
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import azure_functions_runtime as runtime
from google.protobuf.message import Message

from harness.devhost.protocol import function_rpc_pb2 as rpc

HOST_VERSION = "4.1040.0.0"  # the Functions host version devhost stands in for, as it reports it
M = TypeVar("M", bound=Message)


class WorkerError(Exception):
    """The worker refused the app at start-up: the message is the worker's own."""


class InvocationFailed(Exception):
    """The function raised, or the worker could not bind its data: the worker's RpcException."""

    def __init__(self, exception: rpc.RpcException) -> None:
        super().__init__(exception.message)
        self.message = exception.message
        self.stack_trace = exception.stack_trace


@dataclass(frozen=True)
class WorkerRequest:
    """The envelope the proxy worker passes to the library: the message and what goes with it."""

    name: str
    request: rpc.StreamingMessage
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadedFunction:
    """A function as the worker reported it: its ID for invocations and its bindings' JSON."""

    function_id: str
    name: str
    raw_bindings: tuple[str, ...]


class FunctionWorker(Protocol):
    """What the host needs of a worker: the app in this process, or worker processes."""

    async def start(self) -> list[LoadedFunction]: ...

    async def invoke(
        self,
        function_id: str,
        inputs: Sequence[rpc.ParameterBinding],
        trigger_metadata: Mapping[str, rpc.TypedData] | None = None,
    ) -> rpc.InvocationResponse: ...

    async def stop(self) -> None: ...


def _over_the_wire[M: Message](message: M) -> M:
    copy = type(message)()
    copy.ParseFromString(message.SerializeToString())
    return copy


def check_status(result: rpc.StatusResult, doing: str) -> None:
    """A worker's response to init, metadata or load: a failure is the worker's refusal, in its words."""
    if result.status != rpc.StatusResult.Success:
        raise WorkerError(f"the Functions worker failed {doing}: {result.exception.message or result.result}")


class Worker:
    """One app's worker. The library keeps its state in module globals, as a worker process
    does, so one devhost process hosts one app at a time; starting another re-indexes."""

    def __init__(self, app_dir: Path) -> None:
        self.app_dir = app_dir
        self.functions: list[LoadedFunction] = []
        # GUID-shaped IDs, a random prefix and a counter: unique in the process without a system
        # call per invocation (uuid4 costs one, and the event loop then waits for the GIL).
        self._id_prefix = str(uuid.uuid4())[:24]
        self._ids = itertools.count()

    def _next_id(self) -> str:
        return f"{self._id_prefix}{next(self._ids) % (1 << 48):012x}"

    def _message(self, message: rpc.StreamingMessage) -> rpc.StreamingMessage:
        message.request_id = self._next_id()
        return _over_the_wire(message)

    async def start(self) -> list[LoadedFunction]:
        """Init (the worker indexes the app), metadata, then one load per function."""
        # The app's packages resolve from its directory, and the app module is imported afresh:
        # an app's FunctionRegister hands out its functions only once.
        app_path = str(self.app_dir)
        if app_path in sys.path:
            sys.path.remove(app_path)
        sys.path.insert(0, app_path)
        sys.modules.pop("function_app", None)
        runtime.start_threadpool_executor()
        init = await runtime.worker_init_request(
            WorkerRequest(
                "WorkerInitRequest",
                self._message(
                    rpc.StreamingMessage(
                        worker_init_request=rpc.WorkerInitRequest(
                            host_version=HOST_VERSION,
                            worker_directory=str(Path(runtime.__file__).parent),
                            function_app_directory=app_path,
                        )
                    )
                ),
                {"protos": rpc, "host": "127.0.0.1"},
            )
        )
        check_status(_over_the_wire(init).result, f"to load the app in {self.app_dir}")
        metadata = _over_the_wire(
            await runtime.functions_metadata_request(
                WorkerRequest(
                    "WorkerMetadataRequest",
                    self._message(
                        rpc.StreamingMessage(
                            functions_metadata_request=rpc.FunctionsMetadataRequest(
                                function_app_directory=app_path
                            )
                        )
                    ),
                )
            )
        )
        check_status(metadata.result, "to index the app")
        if metadata.use_default_metadata_indexing or not metadata.function_metadata_results:
            raise WorkerError(
                f"the Functions worker found no functions: is there a function_app.py in {app_path}?"
            )
        self.functions = []
        for function in metadata.function_metadata_results:
            loaded = _over_the_wire(
                await runtime.function_load_request(
                    WorkerRequest(
                        "FunctionsLoadRequest",
                        self._message(
                            rpc.StreamingMessage(
                                function_load_request=rpc.FunctionLoadRequest(
                                    function_id=function.function_id, metadata=function
                                )
                            )
                        ),
                    )
                )
            )
            check_status(loaded.result, f"to load {function.name}")
            self.functions.append(
                LoadedFunction(function.function_id, function.name, tuple(function.raw_bindings))
            )
        return self.functions

    async def invoke(
        self,
        function_id: str,
        inputs: Sequence[rpc.ParameterBinding],
        trigger_metadata: Mapping[str, rpc.TypedData] | None = None,
    ) -> rpc.InvocationResponse:
        """One invocation; raises InvocationFailed with the worker's exception if it failed."""
        request = self._message(
            rpc.StreamingMessage(
                invocation_request=rpc.InvocationRequest(
                    invocation_id=self._next_id(),
                    function_id=function_id,
                    input_data=inputs,
                    trigger_metadata=trigger_metadata or {},
                )
            )
        )
        returned: rpc.InvocationResponse = await runtime.invocation_request(
            WorkerRequest("WorkerInvRequest", request, {"threadpool": runtime.get_threadpool_executor()})
        )
        response = _over_the_wire(returned)
        if response.result.status != rpc.StatusResult.Success:
            raise InvocationFailed(response.result.exception)
        return response

    async def stop(self) -> None:
        # Waits for running sync functions, as a worker shutting down does: off the event loop.
        await asyncio.to_thread(runtime.stop_threadpool_executor)


async def _index(app_dir: Path) -> list[dict[str, Any]]:
    worker = Worker(app_dir)
    try:
        functions = await worker.start()
    finally:
        await worker.stop()
    return [{"name": f.name, "bindings": [json.loads(raw) for raw in f.raw_bindings]} for f in functions]


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.devhost.worker APP_DIR``: index an app with the real worker, print what it
    reports as JSON (name and bindings per function), or the worker's refusal and exit 2."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.devhost.worker APP_DIR", file=sys.stderr)
        return 2
    try:
        functions = asyncio.run(_index(Path(args[0]).resolve()))
    except WorkerError as error:
        print(f"devhost: {error}", file=sys.stderr)
        return 2
    print(json.dumps(functions, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
