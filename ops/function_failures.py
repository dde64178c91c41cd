"""Functions that failed, per function, from devhost's invocation results (harness/devhost/invocation_log.py).

A function that fails for an infrastructure reason (a queue it cannot open, a store that refuses,
an unhandled exception) leaves no order behind to look at: this is where it shows. Local only;
on a deployment the same question is the workbook's "Function failures" panel (Application
Insights ``requests`` by ``operation_Name``) and the "Function failures" alert.
"""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.devhost.invocation_log import FunctionOutcomes, read
from ops.output import Output


def devhost_data_dir(environ: Mapping[str, str], app_dir: Path | None = None) -> Path:
    """Where devhost keeps its data, as harness/devhost/config.py reads it (relative: to the app
    directory)."""
    base = (app_dir or Path.cwd()).resolve()
    return base / os.path.expanduser(environ.get("DEVHOST_DATA_DIR", ".devhost"))


def outcomes(environ: Mapping[str, str], app_dir: Path | None = None) -> list[FunctionOutcomes]:
    return read(devhost_data_dir(environ, app_dir))


def failing(found: list[FunctionOutcomes]) -> list[dict[str, Any]]:
    return [
        {
            "function": o.function,
            "failed": o.failed,
            "succeeded": o.succeeded,
            "last_error": o.last_error,
            "last_failed_at": o.last_failed_at,
        }
        for o in found
        if o.failed
    ]


def line(found: list[FunctionOutcomes]) -> str:
    """One line for ``ops status`` and ``ops watch``: each failing function, its count, its last error."""
    rows = failing(found)
    if not rows:
        return "function failures: none"
    said = "; ".join(f"{r['function']} ×{r['failed']} (last: {_first_line(r['last_error'])})" for r in rows)
    return f"function failures: {said}"


def _first_line(error: str | None) -> str:
    return (error or "").strip().splitlines()[0][:160] if error and error.strip() else "no message"


def report(out: Output) -> None:
    """The line, for a person: ``--json`` output stays the command's own rows."""
    if not out.as_json:
        out.line(line(outcomes(os.environ)))
