"""Where a benchmark's figures go: one JSON file per benchmark under ``harness/bench/results/``, which
``harness.tools.bench_figures`` renders into the docs (no measured number is typed by hand there).

Each file says what was measured and under what conditions, so a figure is never read apart
from them: the settings the run used, the machine (cores, load) and the limit the run hit.
"""

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """The conditions every figure depends on: a 2-core machine under load reads slower."""
    return {"cores": os.cpu_count() or 1, "load_1min": round(os.getloadavg()[0], 2)}


def write(name: str, *, settings: Mapping[str, Any], limit: str, figures: Mapping[str, Any]) -> Path:
    """``harness/bench/results/<name>.json``: what ``<!--bench:<name>:KEY-->`` in the docs reads."""
    path = RESULTS / f"{name}.json"
    RESULTS.mkdir(parents=True, exist_ok=True)
    document = {"settings": dict(settings), "machine": machine(), "limit": limit, **figures}
    path.write_text(json.dumps(document, indent=2) + "\n")
    print(f"results: {path}", flush=True)
    return path
