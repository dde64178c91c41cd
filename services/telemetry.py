"""Telemetry (C11) through the vendor-neutral OpenTelemetry API: spans and metrics.

Every span about an order joins that order's trace: the trace ID is derived from the OrderID,
so submission, claims, activities, the agent (another process), replies and the Supervisor
correlate without carrying a context through every message. Spans also carry the instance ID.
Without a configured provider (``adapters/telemetry_export.py``) all of this is a no-op.
"""

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context, metrics, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

NAME = "scheduler-agent-supervisor"
ORDER_ID = "sas.order_id"
INSTANCE_ID = "sas.instance_id"

_tracer = trace.get_tracer(NAME)
_meter = metrics.get_meter(NAME)

transitions = _meter.create_counter(
    "sas.transitions", description="state record transitions, by target state"
)
alerts = _meter.create_counter("sas.alerts", description="operator alerts, by event")
recoveries = _meter.create_counter("sas.supervisor.recoveries", description="expired records, by outcome")
supervisor_pages = _meter.create_counter("sas.supervisor.pages", description="pages read by Supervisor scans")
supervisor_items = _meter.create_counter("sas.supervisor.items", description="expired records scanned")
supervisor_cost = _meter.create_counter(
    "sas.supervisor.cost", description="store cost of scans (RU on Cosmos)"
)
backlog = _meter.create_gauge("sas.backlog", description="orders Pending, seen by the starter")
in_flight = _meter.create_gauge("sas.in_flight", description="orders Processing or Compensating")
agent_calls = _meter.create_counter("sas.agent.calls", description="remote calls by the agent, by outcome")
agent_retries = _meter.create_counter("sas.agent.retries", description="agent calls after the first")
breaker_rejections = _meter.create_counter("sas.agent.breaker_rejections", description="fail-fast attempts")


def order_context(order_id: str) -> context.Context:
    """A remote parent whose trace ID is a function of the OrderID: one trace per order."""
    digest = hashlib.sha256(order_id.encode()).digest()
    parent = SpanContext(
        trace_id=int.from_bytes(digest[:16], "big") or 1,
        span_id=int.from_bytes(digest[16:24], "big") or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(parent))


@contextmanager
def order_span(
    name: str, order_id: str | None, instance_id: str | None = None, **attributes: Any
) -> Iterator[trace.Span]:
    parent = order_context(order_id) if order_id else None
    values = {k: v for k, v in attributes.items() if v is not None}
    if order_id:
        values[ORDER_ID] = order_id
    if instance_id:
        values[INSTANCE_ID] = instance_id
    with _tracer.start_as_current_span(name, context=parent, attributes=values) as span:
        yield span
