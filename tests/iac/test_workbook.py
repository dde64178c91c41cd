"""The operator's workbook (infra/workbooks/operator.workbook.json) asks only for telemetry the
code emits, has the panels docs/operating.md describes, and has the Notebook/1.0 shape.

The names: harness/tools/telemetry_names.py reads the emitted ones from the code (services/telemetry.py's
instruments, their attribute keys, every order_span) and the used ones from the queries; a rename
on either side fails here. The shape: the published schema
(github.com/microsoft/Application-Insights-Workbooks, schema/workbook.json) is not in this
repository, so its rules for the item kinds used here are transcribed below and applied to every
item (the file was validated against the published schema by hand; the schema is not vendored).
"""

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from domain.states import OrderStatus
from harness.tools.telemetry_names import CODE, TELEMETRY, emitted, load_workbook, problems, used

REPO = Path(__file__).resolve().parents[2]
WORKBOOK_FILE = REPO / "infra/workbooks/operator.workbook.json"
MODULE = REPO / "infra/modules/workbook.bicep"
# The panels issues 30 and 42 list, by item name (docs/operating.md explains each).
PANELS = {
    "states",
    "backlog",
    "recoveries",
    "scan-cost",
    "alerts",
    "agent",
    "latency",
    "dead-letters",
    "failed-orders",
    "function-failures",
}


@pytest.fixture
def workbook() -> dict[str, Any]:
    return load_workbook(REPO)


def copy_code(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel in CODE:
        source = REPO / rel
        if source.is_dir():
            shutil.copytree(source, root / rel, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / rel)
    return root


def rename(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} is not in {path}: update this test"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_every_name_a_workbook_query_uses_is_emitted_by_the_code(workbook: dict[str, Any]) -> None:
    assert problems(workbook, emitted(REPO)) == []


def test_the_queries_name_every_metric_panel_they_chart(workbook: dict[str, Any]) -> None:
    """The reader finds the names at all (a check that finds nothing passes vacuously)."""
    names = {name for query in used(workbook) for name in query.names}
    assert {"sas.transitions", "sas.backlog", "sas.in_flight", "sas.supervisor.cost"} <= names
    assert {"sas.alerts", "sas.agent.calls", "sas.agent.breaker_rejections", "submission", "status"} <= names


@pytest.mark.parametrize(
    ("rel", "old", "new", "named"),
    [
        (TELEMETRY, '"sas.transitions"', '"sas.state_changes"', "metric 'sas.transitions'"),
        (TELEMETRY, '"sas.supervisor.cost"', '"sas.supervisor.ru"', "metric 'sas.supervisor.cost'"),
        ("services/claim_pending.py", '{"to_state":', '{"state":', "attribute 'to_state'"),
        ("services/notifications.py", 'order_span("status"', 'order_span("order.status"', "span 'status'"),
        ("services/notifications.py", "detail=(detail", "reason=(detail", "attribute 'detail'"),
        ("services/intake.py", "app=submission.SubmittedBy", "submitter=submission.SubmittedBy", "'app'"),
        (TELEMETRY, 'ORDER_ID = "sas.order_id"', 'ORDER_ID = "order_id"', "attribute 'sas.order_id'"),
    ],
)
def test_renaming_a_name_in_the_code_fails_the_check(
    tmp_path: Path, workbook: dict[str, Any], rel: str, old: str, new: str, named: str
) -> None:
    root = copy_code(tmp_path)
    rename(root / rel, old, new)
    found = problems(workbook, emitted(root))
    assert any(named in problem for problem in found), found


def test_renaming_a_name_in_the_workbook_fails_the_check() -> None:
    text = WORKBOOK_FILE.read_text(encoding="utf-8").replace('\\"sas.alerts\\"', '\\"sas.alert\\"')
    found = problems(json.loads(text), emitted(REPO))
    assert "alerts: metric 'sas.alert' is not emitted by the code" in found


def test_the_statuses_a_query_matches_are_order_statuses(workbook: dict[str, Any]) -> None:
    values = {s.value for s in OrderStatus}
    queries = [q for item in workbook["items"] if item["type"] == 3 for q in [item["content"]["query"]]]
    matched = {
        v
        for q in queries
        for group in re.findall(r'status"\]\) in \(([^)]*)\)|status in \(([^)]*)\)', q)
        for part in group
        for v in re.findall(r'"([^"]+)"', part)
    }
    assert matched, "no status filters found: update this test"
    assert matched <= values, matched - values


def test_the_workbook_has_every_panel_and_takes_time_range_and_app(workbook: dict[str, Any]) -> None:
    names = {item.get("name") for item in workbook["items"]}
    assert names >= PANELS, PANELS - names
    parameters = next(i for i in workbook["items"] if i["type"] == 9)["content"]["parameters"]
    assert {p["name"] for p in parameters} >= {"TimeRange", "App"}
    for item in workbook["items"]:
        if item.get("name") in PANELS:
            assert item["content"].get("timeContextFromParameter") == "TimeRange", item["name"]
            query = item["content"].get("query", "")
            assert item["type"] == 10 or "{TimeRange}" in query, item["name"]
    for name in ("latency", "failed-orders"):
        item = next(i for i in workbook["items"] if i.get("name") == name)
        assert '"{App}"' in item["content"]["query"], name


# The published schema's rules for the kinds of item this workbook uses (its definitions
# markdown, parameter, query, metric, metricItem), applied to every item.
ITEM_REQUIRED = ("type", "content")
ITEM_TYPES = {1: "markdown", 3: "query", 9: "parameter", 10: "metric"}
METRIC_REQUIRED = ("namespace", "metric", "aggregation")


def test_the_workbook_has_the_notebook_shape(workbook: dict[str, Any]) -> None:
    assert workbook["version"] == "Notebook/1.0"
    assert isinstance(workbook["items"], list) and workbook["items"]
    for item in workbook["items"]:
        assert all(key in item for key in ITEM_REQUIRED), item
        assert item["type"] in ITEM_TYPES, item["type"]
        assert isinstance(item["content"], dict) and isinstance(item.get("name"), str)
        content = item["content"]
        if item["type"] == 1:
            assert isinstance(content["json"], str)
        if item["type"] == 3:
            assert content["version"] == "KqlItem/1.0" and isinstance(content["query"], str)
            assert content["resourceType"] == "microsoft.insights/components"
        if item["type"] == 9:
            assert all(
                isinstance(p["name"], str) and isinstance(p["type"], int) for p in content["parameters"]
            )
        if item["type"] == 10:
            assert content["version"] == "MetricsItem/2.0" and isinstance(content["resourceIds"], list)
            for metric in content["metrics"]:
                assert all(key in metric for key in METRIC_REQUIRED), metric
                assert isinstance(metric["aggregation"], int)


def test_every_placeholder_is_filled_in_by_the_module() -> None:
    placeholders = set(re.findall(r"__[A-Z][A-Z_]*__", WORKBOOK_FILE.read_text(encoding="utf-8")))
    replaced = set(re.findall(r"replace\(\w+, '(__[A-Z_]+__)'", MODULE.read_text(encoding="utf-8")))
    assert placeholders and placeholders == replaced
