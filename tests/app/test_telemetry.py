"""Telemetry (C11): the spans of one order, from every part of the app, share one trace.

The app runs in a worker process, as on Azure, and exports its spans as it ships them: JSON
lines under SAS_TELEMETRY_DIR (adapters/telemetry_export.py), written as each span ends and
each metric changes."""

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from domain.messages import AgentRequest
from services.telemetry import INSTANCE_ID, ORDER_ID, order_context
from tests.support.app import start_app, submission
from tests.support.scripted_agent import Answer


def _spans(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for path in folder.glob("*.spans.jsonl") for line in path.read_text().splitlines()
    ]


def test_every_span_of_one_order_shares_one_trace(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "telemetry"
    app = start_app(loop, tmp_path, monkeypatch, settings={"SAS_TELEMETRY_DIR": str(folder)})
    silenced: set[str] = set()

    def script(request: AgentRequest, n: int) -> Answer:
        if request.OrderID == "t-1" and request.Step == "ChargePayment" and "t-1" not in silenced:
            silenced.add("t-1")  # t-1's first charge goes unanswered: a second attempt follows
            return Answer("silent")
        return Answer("ok")

    app.agent.script = script
    app.submit(submission("t-1"))
    app.submit(submission("t-2"))
    app.run_until_terminal("t-1", "t-2")
    app.stop()  # the worker exits and flushes its batch of spans

    spans = _spans(folder)
    mine = [s for s in spans if s["attributes"].get(ORDER_ID) == "t-1"]
    names = {s["name"] for s in mine}
    assert {"submission", "claim", "activity.advance", "agent.reply", "supervisor.recover"} <= names
    expected = trace.get_current_span(order_context("t-1")).get_span_context().trace_id
    assert {s["context"]["trace_id"] for s in mine} == {f"0x{expected:032x}"}
    # Both attempts are in the one trace, told apart by instance ID.
    assert {s["attributes"].get(INSTANCE_ID) for s in mine if s["name"] == "claim"} == {"t-1-1", "t-1-2"}
    other = {s["context"]["trace_id"] for s in spans if s["attributes"].get(ORDER_ID) == "t-2"}
    assert other and f"0x{expected:032x}" not in other
