"""docs/local-stack.md's sequences run one after another as written: each order they submit has
its own OrderID (a used one with other data is a 409 OrderConflict)."""

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"```(?:bash|sh)\n(.*?)```", re.DOTALL)
# What submits an order in a shell block: the CLI's --order-id, or an OrderID in a posted body.
SUBMITTED = re.compile(r"ops submit --order-id (\S+)|-d '\{\"OrderID\": \"([^\"]+)\"")


def submitted_ids(markdown: str) -> list[str]:
    return [a or b for block in FENCE.findall(markdown) for a, b in SUBMITTED.findall(block)]


def test_every_order_the_local_stack_page_submits_has_its_own_id() -> None:
    ids = submitted_ids((ROOT / "docs" / "local-stack.md").read_text())
    assert len(ids) >= 2  # the quick start's and the HTTP section's
    assert [i for i, n in Counter(ids).items() if n > 1] == []


def test_a_page_that_reuses_an_id_is_caught() -> None:
    page = (
        "```bash\nops submit --order-id o-1\n```\n"
        '```bash\ncurl -X POST http://x/api/orders -d \'{"OrderID": "o-1", "Total": 2}\'\n```\n'
    )
    assert submitted_ids(page) == ["o-1", "o-1"]
