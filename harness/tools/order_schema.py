"""Write or check ``docs/order.schema.json``, the JSON Schema of what a submitting app posts.

The schema is generated from the model the front end validates with, so the two cannot drift:
``python -m harness.tools.order_schema`` rewrites it, ``--check`` fails when it is stale (``make test``).
"""

import argparse
import json
import sys
from pathlib import Path

from domain.messages import OrderSubmission

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "order.schema.json"


def render() -> str:
    return json.dumps(OrderSubmission.model_json_schema(), indent=2, ensure_ascii=True) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the shipped schema is stale")
    args = parser.parse_args()
    if args.check:
        if not SCHEMA_FILE.is_file() or SCHEMA_FILE.read_text() != render():
            print(f"{SCHEMA_FILE} is stale: run python -m harness.tools.order_schema", file=sys.stderr)
            return 1
        return 0
    SCHEMA_FILE.write_text(render())
    print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
