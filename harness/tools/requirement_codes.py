"""Check that every requirement code the repository cites is defined in ``docs/requirements.md``.

Code, tests, docs and Bicep cite requirements by code: ``R1``-``R12`` (the pattern's roles),
``C1``-``C12`` (cross-cutting concerns) and ``E1``-``E18`` (the Azure example's flow). A
range such as ``E13-E15`` or ``R2–R4`` cites every code in it. This checker fails when:

- a cited code has no heading (``## R1 …`` to ``#### R1 …``) in ``docs/requirements.md``;
- a code has two headings;
- a path that page cites in backticks (``services/fenced.py``, ``tests/unit/``) does not exist;
- a name it cites in parentheses right after a path (``services/fenced.py`` (``fenced_update``))
  does not occur in that file.

A code numbered 0 is never a requirement (the numbering starts at 1): ``C0`` in the code names
the Unicode control-character set. ``python -m harness.tools.requirement_codes [ROOT]`` prints one line
per problem and exits 1 on any; ``--list`` prints every cited code with where it is cited.
"""

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REQUIREMENTS = Path("docs") / "requirements.md"

# The files that may cite a code, and the directories never read (tools, caches, dependencies).
SUFFIXES = frozenset(
    {".py", ".md", ".bicep", ".sql", ".txt", ".json", ".yaml", ".yml", ".toml", ".sh", ".ps1", ".js"}
)
NAMES = frozenset({"Makefile", "Dockerfile"})
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})  # and every directory starting with "."

CODE = re.compile(r"\b([RCE])(\d{1,2})\b")
# "E13-E15", "E13–E15", "R2-4": both ends and what lies between.
RANGE = re.compile(r"\b([RCE])(\d{1,2})\s*[-–]\s*(?:\1)?(\d{1,2})\b")
HEADING = re.compile(r"^#{2,4}\s+([RCE][1-9]\d?)\b", re.MULTILINE)
# A code span that names a file or directory of the repository: a relative path with a "/" or a
# file name with a known suffix; no spaces, no URL.
PATH_SPAN = re.compile(r"`([\w.-]+(?:/[\w.-]+)*/?)`(?:\s*\(([^)]*)\))?")
NAME_SPAN = re.compile(r"`([A-Za-z_][\w.]*)`")
PATH_SUFFIXES = frozenset({".py", ".md", ".json", ".bicep", ".sql", ".txt", ".toml", ".yaml", ".yml"})


@dataclass(frozen=True, order=True)
class Citation:
    code: str
    path: str  # relative to the root, with "/"
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


def codes_in(text: str) -> set[str]:
    """The requirement codes a line of text cites, ranges expanded, codes numbered 0 left out."""
    found = {f"{letter}{number}" for letter, number in CODE.findall(text)}
    for letter, first, last in RANGE.findall(text):
        low, high = sorted((int(first), int(last)))
        found.update(f"{letter}{n}" for n in range(low, high + 1))
    return {code for code in found if int(code[1:]) > 0}


def _files(root: Path) -> Iterator[Path]:
    for path in sorted(root.iterdir()):
        if path.is_dir():
            if not path.name.startswith(".") and path.name not in SKIPPED_DIRS:
                yield from _files(path)
        elif path.suffix in SUFFIXES or path.name in NAMES:
            yield path


def citations(root: Path) -> list[Citation]:
    """Every citation of a code in the repository under ``root``, outside the requirements page."""
    found: list[Citation] = []
    for path in _files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        relative = path.relative_to(root).as_posix()
        if relative == REQUIREMENTS.as_posix():
            continue  # the page defines the codes; its headings are not citations
        for number, line in enumerate(text.splitlines(), start=1):
            found.extend(Citation(code, relative, number) for code in codes_in(line))
    return sorted(found)


def headings(text: str) -> list[str]:
    """The codes that have a section in the requirements page, in page order (repeats kept)."""
    return HEADING.findall(text)


def is_path(span: str) -> bool:
    return "/" in span or Path(span).suffix in PATH_SUFFIXES


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _cited_paths(root: Path, page: str) -> list[str]:
    problems: list[str] = []
    for match in PATH_SPAN.finditer(page):
        span, names = match.group(1), match.group(2) or ""
        if not is_path(span):
            continue
        where = f"{REQUIREMENTS.as_posix()}:{_line_of(page, match.start())}"
        target = root / span
        if not (target.is_dir() if span.endswith("/") else target.exists()):
            problems.append(f"{where} — cites {span}, which does not exist — fix the path or drop it")
            continue
        if not target.is_file():
            continue
        content = target.read_text(encoding="utf-8")
        for name in NAME_SPAN.findall(names):
            if not re.search(rf"\b{re.escape(name)}\b", content):
                problems.append(
                    f"{where} — cites {name} in {span}, which does not contain it — fix the name or drop it"
                )
    return problems


def problems(root: Path) -> list[str]:
    """What is wrong, one line each: ``where — what — how to fix``. Empty when all is well."""
    page_path = root / REQUIREMENTS
    if not page_path.is_file():
        return [f"{REQUIREMENTS.as_posix()} — missing — write it (one section per requirement code)"]
    page = page_path.read_text(encoding="utf-8")
    defined = headings(page)
    found: list[str] = []
    for code in sorted({c for c in defined if defined.count(c) > 1}):
        found.append(f"{REQUIREMENTS.as_posix()} — {code} has {defined.count(code)} headings — keep one")
    cited: dict[str, list[Citation]] = {}
    for citation in citations(root):
        cited.setdefault(citation.code, []).append(citation)
    for code in sorted(set(cited) - set(defined), key=_code_order):
        places = ", ".join(str(c) for c in cited[code][:5])
        more = f" and {len(cited[code]) - 5} more" if len(cited[code]) > 5 else ""
        found.append(
            f"{places}{more} — cite {code}, which {REQUIREMENTS.as_posix()} does not define — "
            f"add a section '### {code} — …' or fix the citation"
        )
    found.extend(_cited_paths(root, page))
    return found


def _code_order(code: str) -> tuple[int, int]:
    """R before C before E, then by number: R2 before R10."""
    return "RCE".index(code[0]), int(code[1:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("root", nargs="?", default=".", type=Path, help="the repository root (default .)")
    parser.add_argument("--list", action="store_true", help="print every cited code and where it is cited")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    if args.list:
        cited: dict[str, list[Citation]] = {}
        for citation in citations(root):
            cited.setdefault(citation.code, []).append(citation)
        for code in sorted(cited, key=_code_order):
            print(f"{code}: {' '.join(str(c) for c in cited[code])}")
        return 0
    found = problems(root)
    for problem in found:
        print(problem)
    if found:
        return 1
    sections = len(set(headings((root / REQUIREMENTS).read_text(encoding="utf-8"))))
    print(f"requirement codes: {sections} sections, every citation defined")
    return 0


if __name__ == "__main__":
    sys.exit(main())
