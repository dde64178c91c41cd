"""docs/performance.md's cost table is the recorded run of harness.bench.ops_per_order, and the recorded happy
path never does less than the floor the bench names (a floor above a real run is wrong)."""

import json
import re
from pathlib import Path

from harness.bench.ops_per_order import MINIMUM, RESULTS, render_table

ROOT = Path(__file__).resolve().parents[2]
TABLE = re.compile(r"<!-- ops-per-order -->\n(.*?)\n<!-- /ops-per-order -->", re.S)


def test_the_docs_cost_table_is_rendered_from_the_recorded_run() -> None:
    recorded = json.loads(RESULTS.read_text())
    found = TABLE.search((ROOT / "docs" / "performance.md").read_text())
    assert found, "docs/performance.md has no <!-- ops-per-order --> table"
    assert found.group(1).strip() == render_table(recorded["per_order"]), (
        "run `python -m harness.bench.ops_per_order --json harness/bench/results/ops_per_order.json` "
        "and paste its table"
    )


def test_the_recorded_happy_path_is_at_or_above_the_floor() -> None:
    happy = json.loads(RESULTS.read_text())["per_order"]["happy"]
    below = {
        name: (happy.get(name, 0), floor) for name, floor in MINIMUM.items() if happy.get(name, 0) < floor
    }
    assert not below, f"measured below the floor, so the floor is wrong: {below}"
