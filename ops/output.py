"""How every command prints: a table or one field a line for a person, JSON with ``--json``."""

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Table


def text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    return str(value)


def iso(at: datetime | str | None) -> str:
    """One spelling for every store's times (``Z`` or ``+00:00``), so that they sort as times."""
    if isinstance(at, str):
        try:
            at = datetime.fromisoformat(at)
        except ValueError:
            return str(at)
    if at is None:
        return ""
    return at.astimezone(UTC).isoformat(timespec="milliseconds")


def _table(title: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")  # an ID cut short cannot be pasted back
    for row in rows:
        table.add_row(*("" if row.get(c) is None else str(row.get(c)) for c in columns))
    return table


class Output:
    def __init__(self, console: Console, as_json: bool) -> None:
        self.console = console
        self.as_json = as_json

    def show(self, title: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
        if self.as_json:
            self.console.print_json(json.dumps(list(rows), default=str))
        else:
            self.console.print(_table(title, rows, columns))

    def show_fields(self, title: str, row: dict[str, Any]) -> None:
        """One record, one field a line: readable at 80 columns however many fields it has."""
        if self.as_json:
            self.console.print_json(json.dumps([row], default=str))
            return
        table = Table(title=title, show_header=False, box=None, title_justify="left")
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for name, value in row.items():
            table.add_row(name, text(value))
        self.console.print(table)

    def step(self, command: str, what: str, body: dict[str, Any]) -> None:
        """One step of a command that follows something as it happens: a line each, printed at
        once (JSON Lines with ``--json``)."""
        if self.as_json:
            self.console.file.write(json.dumps({"Step": what, **body}, default=str) + "\n")
            self.console.file.flush()
            return
        detail = ", ".join(f"{k}={v}" for k, v in body.items() if v is not None)
        self.line(f"{command}: {what}: {detail}")

    def line(self, line: str) -> None:
        """Plain text as it is: no markup, highlighting or wrapping."""
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)
