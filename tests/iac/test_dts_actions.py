"""docs/deploying.md's table of Durable Task Scheduler actions per order is what
harness/bench/dts_actions.py computes, and its happy path does the Durable work harness/bench/ops_per_order.py
measured (harness/bench/results/ops_per_order.json)."""

import json
import re

from harness.bench import dts_actions
from tests.support.iac import REPO

TABLE = re.compile(r"<!-- dts-actions -->\n(.*?)\n<!-- /dts-actions -->", re.S)


def test_the_docs_table_is_the_scripts_output() -> None:
    docs = (REPO / "docs" / "deploying.md").read_text(encoding="utf-8")
    found = TABLE.search(docs)
    assert found, "docs/deploying.md has no <!-- dts-actions --> table"
    assert found.group(1).strip() == dts_actions.table(), (
        "run `python -m harness.bench.dts_actions` and paste its table"
    )


def test_the_happy_path_does_the_measured_durable_work() -> None:
    recorded = json.loads((REPO / "harness" / "bench" / "results" / "ops_per_order.json").read_text())
    measured = recorded["per_order"]["happy"]["durable activities"]
    assert dts_actions.per_order()["happy path"].activities == measured


def test_actions_follow_the_billing_weights() -> None:
    work = dts_actions.DurableWork(starts=1, activities=1, timers=1, events=1)
    assert work.actions == 1 + 2 + 1 + 1
