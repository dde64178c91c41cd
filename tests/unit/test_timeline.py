"""An order's lanes (ops/timeline.py): one per attempt and one for the order, bars for work that
took time, a round trip from the activity that sent a request to its reply, markers for instants."""

from typing import Any

from ops.timeline import ORDER_LANE, lanes


def span(name: str, start: str, end: str, **attributes: Any) -> dict[str, Any]:
    return {
        "name": name,
        "start_time": f"2026-03-01T09:00:{start}Z",
        "end_time": f"2026-03-01T09:00:{end}Z",
        "attributes": {"sas.order_id": "o-1", **attributes},
    }


def test_spans_fall_into_lanes_per_attempt_with_bars_round_trips_and_markers() -> None:
    spans = [
        span("submission", "00", "01"),
        span("claim", "02", "03", **{"sas.instance_id": "o-1-2"}),
        span("activity.advance", "04", "05", **{"sas.instance_id": "o-1-1"}),
        span("agent.reply", "08", "08", step="ChargePayment", **{"sas.instance_id": "o-1-1"}),
        span("activity.advance", "09", "10", **{"sas.instance_id": "o-1-1"}),
        span("agent.reply", "12", "12", step="RefundPayment", **{"sas.instance_id": "o-1-1"}),
        span("status", "13", "13", status="compensated"),
    ]
    drawn = lanes(spans, frozenset({"RefundPayment"}))
    assert [lane["lane"] for lane in drawn] == [ORDER_LANE, "o-1-1", "o-1-2"]
    order, first, second = (lane["items"] for lane in drawn)
    assert [(i["kind"], i["name"]) for i in order] == [("marker", "submission"), ("marker", "status")]
    assert [(i["kind"], i["name"], i["source"]) for i in first] == [
        ("bar", "activity.advance", "activity"),
        ("bar", "agent round trip ChargePayment", "round-trip"),
        ("marker", "agent.reply", "agent"),
        ("bar", "activity.advance", "activity"),
        ("bar", "agent round trip RefundPayment", "round-trip"),
        ("marker", "agent.reply", "compensation"),
    ]
    trip = first[1]
    assert (trip["start"], trip["end"]) == ("2026-03-01T09:00:05+00:00", "2026-03-01T09:00:08+00:00")
    assert [(i["kind"], i["name"]) for i in second] == [("bar", "claim")]
