"""One order's life as lanes for the order page's timeline (ops/static/order.js draws it).

One lane per attempt (an attempt is one orchestration instance, ``<OrderID>-<attempt>``, which
every span of it carries as ``sas.instance_id``), and one for the order itself (submission,
status messages, the Supervisor, compensation, alerts). A span that took time is a bar (claims,
activities, the agent's handling of a request and each remote call); an instant is a marker.
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


def lanes(spans: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``spans`` as the JSON-lines exporter writes them; ``events`` the page's other rows (``at``,
    ``source``, ``what``, ``detail``): compensation, status messages and alerts, as markers."""
    by_lane: dict[str, list[dict[str, Any]]] = {ORDER_LANE: []}
    for span in spans:
        attributes = span.get("attributes") or {}
        lane = str(attributes.get(INSTANCE_ID) or ORDER_LANE)
        name = str(span.get("name"))
        start, end = _at(span["start_time"]), _at(span.get("end_time") or span["start_time"])
        bar = name not in MARKERS and end > start
        by_lane.setdefault(lane, []).append(
            {
                "kind": "bar" if bar else "marker",
                "name": name,
                "start": start.isoformat(),
                "end": end.isoformat() if bar else start.isoformat(),
                "detail": _detail(attributes),
                "source": "span",
            }
        )
    for event in events:
        if event["source"] in ("compensation", "status", "alert"):
            at = _at(event["at"]).isoformat()
            item = {"kind": "marker", "name": event["what"], "start": at, "end": at}
            by_lane[ORDER_LANE].append({**item, "detail": event["detail"] or "", "source": event["source"]})
    ordered = sorted(by_lane, key=lambda lane: (lane != ORDER_LANE, _attempt(lane), lane))
    return [{"lane": lane, "items": sorted(by_lane[lane], key=lambda i: i["start"])} for lane in ordered]


def _attempt(lane: str) -> int:
    tail = lane.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0
