"""One order's life as lanes for the order page's timeline (ops/static/order.js draws it).

One lane per attempt (an attempt is one orchestration instance, ``<OrderID>-<attempt>``, which
every span of it carries as ``sas.instance_id``), and one for the order itself (submission,
status messages, the Supervisor). A span that took time is a bar (claims, activities, the agent's
handling of a request and each remote call); an agent round trip is a bar from the activity that
sent the request to the reply; an instant is a marker, a reply to a compensating action marked as
compensation. Drawn from the spans, and the durable timers from the attempt's Durable history
(a timer is no span: the host keeps it): a bar from when the orchestrator set it to when it was
due, named for whether it fired or the reply won the race. The spans and devhost's history share
one clock (the host's, which a test runs virtual), so the lanes line up.
"""

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from services.telemetry import INSTANCE_ID, ORDER_ID

ORDER_LANE = "order"
# Spans that mark a moment, whatever their duration: a reply arriving, a status sent, a recovery.
MARKERS = frozenset({"agent.reply", "status", "supervisor.recover", "submission"})
# Durable history event types (harness/devhost/durable_wire.py EventType): a timer set, a timer fired.
TIMER_CREATED, TIMER_FIRED = 10, 11


def _at(text: str) -> datetime:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def _detail(attributes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(attributes.items()) if k not in (ORDER_ID, INSTANCE_ID))


def timers(histories: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Each attempt's durable timers as bars, by instance ID, from its history events."""
    by_lane: dict[str, list[dict[str, Any]]] = {}
    for instance_id, events in histories.items():
        history = list(events)
        fired = {e.get("TimerId") for e in history if e.get("EventType") == TIMER_FIRED}
        for event in history:
            if event.get("EventType") != TIMER_CREATED or not event.get("FireAt"):
                continue
            outcome = "fired" if event.get("EventId") in fired else "not fired: the reply came first"
            by_lane.setdefault(instance_id, []).append(
                _item(
                    "bar",
                    f"timer ({outcome})",
                    _at(event["Timestamp"]).isoformat(),
                    _at(event["FireAt"]).isoformat(),
                    detail=f"due {event['FireAt']}",
                    source="timer",
                )
            )
    return by_lane


def lanes(
    spans: list[dict[str, Any]],
    undo_actions: frozenset[str],
    timer_bars: Mapping[str, list[dict[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """``spans`` as the JSON-lines exporter writes them; ``undo_actions`` the compensating steps
    the order's compensation log names; ``timer_bars`` each attempt's timers (``timers``)."""
    by_lane: dict[str, list[dict[str, Any]]] = {ORDER_LANE: []}
    for instance_id, items in (timer_bars or {}).items():
        by_lane.setdefault(instance_id, []).extend(items)
    for span in sorted(spans, key=lambda s: str(s["start_time"])):
        attributes = span.get("attributes") or {}
        lane = by_lane.setdefault(str(attributes.get(INSTANCE_ID) or ORDER_LANE), [])
        name = str(span.get("name"))
        start, end = _at(span["start_time"]), _at(span.get("end_time") or span["start_time"])
        bar = name not in MARKERS and end > start
        if name == "agent.reply":
            sent = [i for i in lane if i["name"].startswith("activity.") and i["end"] <= start.isoformat()]
            if sent:
                lane.append(
                    _item(
                        "bar",
                        f"agent round trip {attributes.get('step', '')}".strip(),
                        sent[-1]["end"],
                        start.isoformat(),
                        detail="",
                        source="round-trip",
                    )
                )
        undo = name == "agent.reply" and attributes.get("step") in undo_actions
        lane.append(
            _item(
                "bar" if bar else "marker",
                name,
                start.isoformat(),
                end.isoformat() if bar else start.isoformat(),
                detail=_detail(attributes),
                source="compensation" if undo else name.split(".", maxsplit=1)[0],
            )
        )
    ordered = sorted(by_lane, key=lambda lane: (lane != ORDER_LANE, _attempt(lane), lane))
    return [{"lane": lane, "items": sorted(by_lane[lane], key=lambda i: i["start"])} for lane in ordered]


def _item(kind: str, name: str, start: str, end: str, *, detail: str, source: str) -> dict[str, Any]:
    return {"kind": kind, "name": name, "start": start, "end": end, "detail": detail, "source": source}


def _attempt(lane: str) -> int:
    tail = lane.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0
