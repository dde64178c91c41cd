"""Every measured figure in the docs, rendered from the benchmarks' results files.

    python -m harness.tools.bench_figures [--write]

A figure is written in markdown as ``<!--bench:FILE:KEY-->VALUE<!--/bench-->`` (or
``<!--bench:FILE:KEY|FORMAT-->``, FORMAT a Python format spec such as ``.1f`` or ``,``): FILE is a
results file ``harness/bench/results/FILE.json`` that a ``harness/bench/`` script writes, KEY a dotted path
into
it (``burst.orders_per_second``; a name that holds a dot or a space is matched whole, the
longest first: ``per_order.happy.Service Bus.send``), VALUE the value as rendered. Without
``--write`` it lists each figure that differs from its results and each FILE or KEY that is
missing, and exits 1 if any;
with ``--write`` it re-renders the figures in place (a missing FILE or KEY still fails). So no
measured number is typed by hand, and a new run of a benchmark shows in the docs at once.
"""

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "harness" / "bench" / "results"
FIGURE = re.compile(
    r"<!--bench:(?P<file>[\w.-]+):(?P<key>[^|>]+?)(?:\|(?P<format>[^>]*))?-->(?P<value>[^`<\n]*)<!--/bench-->"
)


def _live(match: re.Match[str]) -> bool:
    """Not the syntax itself shown as inline code (`<!--bench:...-->`), as docs/testing.md does."""
    return not match.string[: match.start()].endswith("`")


def documents(root: Path = ROOT) -> list[Path]:
    """The docs a user reads: the README and docs/*.md."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


class FigureError(Exception):
    """A figure whose results file or key is missing, or whose value cannot be rendered."""


@dataclass(frozen=True)
class Figure:
    path: Path
    line: int
    file: str
    key: str
    format: str
    shown: str

    def where(self) -> str:
        return f"{self.path.name}:{self.line}: <!--bench:{self.file}:{self.key}-->"


def figures(path: Path) -> list[Figure]:
    text = path.read_text()
    return [
        Figure(
            path,
            text.count("\n", 0, m.start()) + 1,
            m["file"],
            m["key"],
            m["format"] or "",
            m["value"],
        )
        for m in FIGURE.finditer(text)
        if _live(m)
    ]


def lookup(results: Path, file: str, key: str) -> Any:
    source = results / f"{file}.json"
    if not source.is_file():
        raise FigureError(f"no results file {source.relative_to(source.parents[2])}")
    value: Any = json.loads(source.read_text())
    parts = key.split(".")
    while parts:
        # The longest run of parts that names a key: names such as "Service Bus.send" hold dots.
        names = [".".join(parts[:end]) for end in range(len(parts), 0, -1)]
        name = next((n for n in names if isinstance(value, dict) and n in value), None)
        if name is None:
            raise FigureError(f"{file}.json has no key {key!r} (no {parts[0]!r})")
        value, parts = value[name], parts[name.count(".") + 1 :]
    if isinstance(value, dict | list):
        raise FigureError(f"{file}.json's {key!r} is not a single value")
    return value


def render(value: Any, spec: str) -> str:
    """The value as the docs show it: a format spec when one is given, else as JSON has it."""
    try:
        return format(value, spec) if spec else str(value)
    except (TypeError, ValueError) as error:
        raise FigureError(f"cannot format {value!r} with {spec!r}: {error}") from error


def check(paths: list[Path], results: Path = RESULTS) -> list[str]:
    """What is wrong: each figure that differs from its results, or whose source is missing."""
    problems = []
    for path in paths:
        for figure in figures(path):
            try:
                expected = render(lookup(results, figure.file, figure.key), figure.format)
            except FigureError as error:
                problems.append(f"{figure.where()}: {error}")
                continue
            if figure.shown != expected:
                problems.append(f"{figure.where()}: shows {figure.shown!r}, the results say {expected!r}")
    return problems


def write(paths: list[Path], results: Path = RESULTS) -> list[str]:
    """Re-renders every figure in place; returns the problems that rendering cannot fix."""
    problems: list[str] = []
    for path in paths:

        def rendered(match: re.Match[str], path: Path = path) -> str:
            if not _live(match):
                return match[0]
            try:
                value = render(lookup(results, match["file"], match["key"]), match["format"] or "")
            except FigureError as error:
                problems.append(f"{path.name}: <!--bench:{match['file']}:{match['key']}-->: {error}")
                return match[0]
            return match[0].replace(f"-->{match['value']}<!--/bench-->", f"-->{value}<!--/bench-->", 1)

        text = path.read_text()
        new = FIGURE.sub(rendered, text)
        if new != text:
            path.write_text(new)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.tools.bench_figures", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--write", action="store_true", help="re-render the figures in place")
    args = parser.parse_args(argv)
    paths = documents()
    problems = write(paths) if args.write else check(paths)
    for problem in problems:
        print(problem, file=sys.stderr)
    count = sum(len(figures(path)) for path in paths)
    print(f"bench figures: {count} in {len(paths)} documents, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
