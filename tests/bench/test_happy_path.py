"""harness.bench.happy_path's arithmetic: the stages split the latency exactly, from spans as exported."""

import json
from pathlib import Path

from harness.bench.happy_path import STAGES, OrderSpans, Span, Timing, read_spans, stages

T = 1_000_000.0  # an epoch second


def span(name: str, start: float, end: float, step: str | None = None) -> Span:
    return Span(name, T + start, T + end, step)


# One order through two agent steps, times in seconds from T.
SPANS = [
    span("submission", 0.030, 0.040),
    span("claim", 0.045, 0.050),
    span("activity.advance", 0.060, 0.070),
    span("agent.request", 0.080, 0.110, "ReserveInventory"),
    span("agent.reply", 0.130, 0.140, "ReserveInventory"),
    span("activity.advance", 0.150, 0.160),
    span("agent.request", 0.170, 0.190, "ChargePayment"),
    span("agent.reply", 0.200, 0.205, "ChargePayment"),
    span("activity.advance", 0.215, 0.230),
]
TIMING = Timing(sent=T, answered=T + 0.010, received=T + 0.250, at=T + 0.225)


def test_the_top_level_stages_add_up_to_the_latency() -> None:
    spans = OrderSpans.of(SPANS, agent_steps=2)
    assert spans is not None
    out = stages(TIMING, spans)
    top = [name for name, _ in STAGES if not name.startswith(" ") and name != "latency"]
    assert abs(sum(out[name] for name in top) - out["latency"]) < 1e-9
    assert abs(out["latency"] - 0.250) < 1e-9
    # Round trips: advance end -> reply end, twice.
    assert abs(out["agent round trips"] - ((0.140 - 0.070) + (0.205 - 0.160))) < 1e-9
    # The splits add up to what they split.
    trips = ("  request hop", "  agent", "  reply hop", "  raise event")
    assert abs(sum(out[name] for name in trips) - out["agent round trips"]) < 1e-9
    assert abs(out["  activities"] + out["  Durable, host"] - out["orchestration"]) < 1e-9
    assert abs(out["status"] - 0.020) < 1e-9


def test_an_order_with_a_span_not_yet_exported_is_not_complete() -> None:
    assert OrderSpans.of(SPANS[:-1], agent_steps=2) is None
    without_agent = OrderSpans.of([s for s in SPANS if s.name != "agent.request"], agent_steps=2)
    assert without_agent is not None and without_agent.requests is None
    assert "  agent" not in stages(TIMING, without_agent)


def test_spans_are_read_by_order_and_torn_lines_counted(tmp_path: Path) -> None:
    def row(name: str, order_id: str, start: str, end: str) -> str:
        attributes = {"sas.order_id": order_id, "step": "ChargePayment"}
        return json.dumps({"name": name, "start_time": start, "end_time": end, "attributes": attributes})

    (tmp_path / "function-app.spans.jsonl").write_text(
        row("claim", "o-1", "2026-03-01T09:00:00.200000Z", "2026-03-01T09:00:00.300000Z")
        + "\n"
        + row("submission", "o-1", "2026-03-01T09:00:00.100000Z", "2026-03-01T09:00:00.150000Z")
        + "\n"
        + row("submission", "o-2", "2026-03-01T09:00:00.100000Z", "2026-03-01T09:00:00.150000Z")
        + "\n"
    )
    (tmp_path / "agent.spans.jsonl").write_text('{"name": "agent.requ\n')
    spans, torn = read_spans(tmp_path, ["o-1"])
    assert torn == 1
    assert [s.name for s in spans["o-1"]] == ["submission", "claim"]
    assert abs(spans["o-1"][1].end - spans["o-1"][1].start - 0.1) < 1e-6
    assert spans["o-1"][0].step == "ChargePayment"
