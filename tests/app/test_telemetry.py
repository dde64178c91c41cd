"""Telemetry (C11): the spans of one order, from every part of the app, share one trace."""

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from domain.messages import AgentRequest
from services.telemetry import INSTANCE_ID, ORDER_ID, order_context
from tests.app.conftest import Answer, App, submission

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    # The provider is process-wide and can be set once: this module owns it in its worker.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)
    yield _exporter
    provider.shutdown()  # later tests in this worker export nothing more


def test_every_span_of_one_order_shares_one_trace(spans: InMemorySpanExporter, app: App) -> None:
    spans.clear()
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
    mine = [s for s in spans.get_finished_spans() if (s.attributes or {}).get(ORDER_ID) == "t-1"]
    names = {s.name for s in mine}
    assert {
        "submission",
        "claim",
        "activity.advance",
        "agent.reply",
        "supervisor.recover",
    } <= names
    expected = order_context("t-1")
    trace_id = trace.get_current_span(expected).get_span_context().trace_id
    assert {s.context.trace_id for s in mine} == {trace_id}
    # Both attempts are in the one trace, told apart by instance ID.
    assert {(s.attributes or {}).get(INSTANCE_ID) for s in mine if s.name == "claim"} == {"t-1-1", "t-1-2"}
    other = {
        s.context.trace_id for s in spans.get_finished_spans() if (s.attributes or {}).get(ORDER_ID) == "t-2"
    }
    assert other and trace_id not in other
