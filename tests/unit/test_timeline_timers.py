"""The order page's durable timers: drawn from each attempt's Durable history, one bar from when
the orchestrator set the timer to when it was due, named for whether it fired; read from a real
recorded history of the corpus, and placed in the attempt's lane."""

import json
from pathlib import Path

from ops import timeline

HISTORIES = Path(__file__).resolve().parents[1] / "replay" / "histories"


def history(name: str) -> list[dict[str, object]]:
    events: list[dict[str, object]] = json.loads((HISTORIES / name).read_text())["history"]
    return events


def test_a_timer_the_reply_beat_is_a_bar_to_its_due_time_marked_not_fired() -> None:
    bars = timeline.timers({"o-1-1": history("happy-1-1.json")})["o-1-1"]
    assert bars and all(bar["source"] == "timer" and bar["kind"] == "bar" for bar in bars)
    assert all(bar["start"] < bar["end"] for bar in bars)
    assert {bar["name"] for bar in bars} == {"timer (not fired: the reply came first)"}


def test_a_timer_that_fired_says_so() -> None:
    events = [
        {
            "EventType": 10,
            "EventId": 3,
            "Timestamp": "2026-03-01T09:00:00Z",
            "FireAt": "2026-03-01T09:00:30Z",
        },
        {"EventType": 11, "EventId": -1, "TimerId": 3, "Timestamp": "2026-03-01T09:00:30Z"},
    ]
    (bar,) = timeline.timers({"o-2-1": events})["o-2-1"]
    assert bar["name"] == "timer (fired)"
    assert (bar["start"], bar["end"]) == ("2026-03-01T09:00:00+00:00", "2026-03-01T09:00:30+00:00")


def test_the_timers_join_their_attempts_lane() -> None:
    bars = timeline.timers({"o-1-2": history("happy-1-1.json")})
    drawn = timeline.lanes([], frozenset(), bars)
    assert [lane["lane"] for lane in drawn] == ["order", "o-1-2"]
    assert [item["source"] for item in drawn[1]["items"]] == ["timer"] * len(bars["o-1-2"])
