"""devhost's sample app (tests/devhost/sample_app) in an in-process host with a virtual clock.

All tests of a worker share one event loop: the Durable SDK keeps a module-level aiohttp
session, which belongs to the loop that created it (as in a real worker process).
"""

import asyncio
import json
import os
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest

from adapters.local_settings import SETTINGS_FILE_VARIABLE
from harness.devhost.clock import HostClock, VirtualClock
from harness.devhost.host import Host
from harness.devhost.polling import IDLE_WAIT

SAMPLE_APP = Path(__file__).resolve().parents[1] / "devhost" / "sample_app"
T = TypeVar("T")


class Sample:
    """The sample app running in an in-process devhost, plus helpers to talk to it."""

    def __init__(self, host: Host, loop: asyncio.AbstractEventLoop, output: Path) -> None:
        self.host = host
        self.loop = loop
        self.output = output

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def http(self, method: str, path: str, body: object = None) -> tuple[int, str]:
        async def call() -> tuple[int, str]:
            async with (
                aiohttp.ClientSession() as session,
                session.request(method, self.host.base_url + path, json=body) as response,
            ):
                return response.status, await response.text()

        return self.run(call())

    def start(self, orchestrator: str, body: object = None, instance_id: str | None = None) -> str:
        query = f"?id={instance_id}" if instance_id else ""
        status, text = self.http("POST", f"/api/start/{orchestrator}{query}", body)
        assert status == 202, text
        return str(json.loads(text)["id"])

    def status(self, instance_id: str) -> dict[str, Any]:
        found = self.host.engine.status(instance_id)
        assert found is not None
        return found

    def finished(self, instance_id: str) -> bool:
        return self.status(instance_id)["runtimeStatus"] in ("Completed", "Failed", "Terminated")

    def run_until_finished(self, *instance_ids: str) -> None:
        self.run(self.host.run_until(lambda: all(self.finished(i) for i in instance_ids)))

    def records(self, kind: str) -> list[dict[str, Any]]:
        if not self.output.exists():
            return []
        lines = [json.loads(line) for line in self.output.read_text().splitlines()]
        return [line for line in lines if line["kind"] == kind]


def make_sample(
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    clock: HostClock | None = None,
    *,
    idle_wait: float = IDLE_WAIT,
) -> Sample:
    output = tmp_path / "out.jsonl"
    monkeypatch.setenv("SAMPLE_OUTPUT", str(output))
    monkeypatch.setenv(SETTINGS_FILE_VARIABLE, str(SAMPLE_APP / "local.settings.json"))
    # Set per test: the host exports it to the process environment for the app to read.
    monkeypatch.setenv("LOCAL_SERVICEBUS_PATH", str(tmp_path / "data" / "servicebus.db"))
    host = Host(
        SAMPLE_APP,
        clock=clock or VirtualClock(),
        data_dir=tmp_path / "data",
        port=0,
        env=os.environ,
        idle_wait=idle_wait,
    )
    loop.run_until_complete(host.start())
    return Sample(host, loop, output)
