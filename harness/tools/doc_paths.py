"""Check that every repository path the documentation cites in backticks still exists.

Docs drift when code moves: a README that names ``adapters/sql_orders.py`` after the file has
become ``adapters/sql/orders.py`` sends a reader nowhere. This checker reads ``README.md``, every
page under ``docs/`` and every other ``README.md`` and ``*.md`` beside the code, and fails when:

- a backticked path (``services/fenced.py``, ``tests/unit/``) does not exist, relative to the
  repository root or to the page's own folder;
- a name cited in parentheses right after a path (``services/fenced.py`` (``fenced_update``))
  does not occur in that file.

A span is only taken for a path when its first segment is a file or folder of the repository
(``HTTP/1.1`` and ``azure/core/…`` in site-packages are not), and paths git ignores (run-time
files such as ``local.settings.json`` or ``.data/``) are never required to exist.
``python -m harness.tools.doc_paths [ROOT]`` prints one line per problem and exits 1 on any.
"""

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pathspec

from harness.tools.requirement_codes import NAME_SPAN, PATH_SPAN, is_path

SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})  # and every directory starting with "."


def pages(root: Path) -> Iterator[Path]:
    """Every Markdown page of the repository, outside dependencies and dot-directories."""
    for path in sorted(root.rglob("*.md")):
        relative = path.relative_to(root)
        if any(part in SKIPPED_DIRS or part.startswith(".") for part in relative.parts[:-1]):
            continue
        yield path


def _ignored(root: Path) -> pathspec.GitIgnoreSpec:
    gitignore = root / ".gitignore"
    lines = gitignore.read_text().splitlines() if gitignore.is_file() else []
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _exists(target: Path, span: str) -> bool:
    return target.is_dir() if span.endswith("/") else target.exists()


def page_problems(root: Path, page: Path, ignored: pathspec.GitIgnoreSpec) -> list[str]:
    text = page.read_text(encoding="utf-8")
    name = page.relative_to(root).as_posix()
    found: list[str] = []
    for match in PATH_SPAN.finditer(text):
        span, names = match.group(1), match.group(2) or ""
        if not is_path(span) or ignored.match_file(span):
            continue
        bases = (root, page.parent)
        target = next((base / span for base in bases if _exists(base / span, span)), None)
        where = f"{name}:{_line_of(text, match.start())}"
        if target is None:
            first = span.split("/")[0]
            if any((base / first).exists() for base in bases) and "/" in span.rstrip("/"):
                found.append(f"{where} — cites {span}, which does not exist — fix the path or drop it")
            continue
        if not target.is_file():
            continue
        content = target.read_text(encoding="utf-8")
        for cited in NAME_SPAN.findall(names):
            if not re.search(rf"\b{re.escape(cited)}\b", content):
                found.append(f"{where} — cites {cited} in {span}, which does not contain it — fix the name")
    return found


def problems(root: Path) -> list[str]:
    ignored = _ignored(root)
    return [problem for page in pages(root) for problem in page_problems(root, page, ignored)]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path.cwd()
    found = problems(root)
    for problem in found:
        print(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
