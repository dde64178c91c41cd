"""One order's life as lanes for the order page's timeline (ops/static/order.js draws it).

One lane per attempt (an attempt is one orchestration instance, ``<OrderID>-<attempt>``, which
every span of it carries as ``sas.instance_id``), and one for the order itself (submission,
status messages, the Supervisor). A span that took time is a bar (claims, activities, the agent's
handling of a request and each remote call); an agent round trip is a bar from the activity that
sent the request to the reply; an instant is a marker, a reply to a compensating action marked as
compensation. Drawn from the spans alone: they share one clock (the records and the compensation
log keep the app's, which a test runs virtual), so the lanes line up.
"""

from datetime import datetime
from typing import Any

from services.telemetry import INSTANCE_ID, ORDER_ID

ORDER_LANE = "order"
# Spans that mark a moment, whatever their duration: a reply arriving, a status sent, a recovery.
MARKERS = frozenset({"agent.reply", "status", "supervisor.recover", "submission"})


def _at(text: str) -> datetime:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def _detail(attributes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(attributes.items()) if k not in (ORDER_ID, INSTANCE_ID))


def lanes(spans: list[dict[str, Any]], undo_actions: frozenset[str]) -> list[dict[str, Any]]:
    """``spans`` as the JSON-lines exporter writes them; ``undo_actions`` the compensating steps
    the order's compensation log names."""
    by_lane: dict[str, list[dict[str, Any]]] = {ORDER_LANE: []}
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
