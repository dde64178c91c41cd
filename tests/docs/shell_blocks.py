"""The shell blocks of a markdown document, as sybil examples: what each runs, and the output it
shows.

A ```bash, ```sh or ```shell block is a script; a ```console block is commands after ``$ `` (a
line ending in ``\\`` goes on) with the output each prints below it. A plain fenced block (no
language, ``text`` or ``output``) right after a script block is the output the script prints.

A line that starts a server a user leaves running in its own terminal (``make run``, ``python -m
simulator``, ...: ``SERVICES``) is started in the background by the document's stack
(``tests/docs/stack.py``) and kept up for the document's later blocks; the rest of the block runs
as a bash script, in order.

Output is checked with a tolerant matcher (``matches``), the rule being: trailing spaces and
leading or trailing blank lines are ignored; ``...`` (or ``…``) in the shown output matches any
text, across lines; and the parts that differ from run to run match any value of their kind:
an ISO 8601 time, a UUID, a run of 12 or more hex digits, a duration (a number with ``ms`` or
``s``), and an ID with a generated suffix (``smoke-…``, that is a ``…`` right after a word).
Everything else must be as shown.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from sybil import Document, Example, Region
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

SCRIPT_LANGUAGES = ("bash", "sh", "shell")
LANGUAGES = (*SCRIPT_LANGUAGES, "console")
OUTPUT_BLOCK = re.compile(
    r"[ \t]*\n(?:[ \t]*\n)*```(?:text|output)?[ \t]*\n(?P<output>.*?)^```[ \t]*$", re.S | re.M
)


@dataclass(frozen=True)
class Service:
    """A server a document starts and leaves running: started in the background until it prints
    ``ready``, then kept up for the document's later blocks."""

    kind: str
    starts: re.Pattern[str]
    ready: re.Pattern[str]


SERVICES = (
    # A new devhost is a new stack: what the document started before is stopped first.
    Service("devhost", re.compile(r"make run\b"), re.compile(r"Host started: ")),
    Service("devhost", re.compile(r"\S*python -m harness.devhost start\b"), re.compile(r"Host started: ")),
    Service("simulator", re.compile(r"\S*python -m simulator\b"), re.compile(r"Simulator listening on ")),
    Service("agent", re.compile(r"\S*python -m agent_worker\b"), re.compile(r"Agent \S+ started: ")),
)


@dataclass(frozen=True)
class Step:
    """One thing a block does: a script run to its end, or a server started (``service``), with
    the output it must print (``expected``, None when the doc shows none)."""

    command: str
    service: Service | None = None
    expected: str | None = None


@dataclass(frozen=True)
class ShellBlock:
    language: str
    source: str
    line: int
    steps: tuple[Step, ...] = field(default=())


def _service(line: str) -> Service | None:
    return next((s for s in SERVICES if s.starts.match(line.strip())), None)


def script_steps(source: str, expected: str | None = None) -> tuple[Step, ...]:
    """A script's lines, in order: each server line a step of its own, the lines between them one
    script. A line inside an open quote or after a ``\\`` continues the command before it."""
    steps: list[Step] = []
    chunk: list[str] = []
    continued = False
    for line in source.splitlines():
        service = None if continued else _service(line)
        if service is not None:
            if chunk:
                steps.append(Step("\n".join(chunk)))
                chunk = []
            steps.append(Step(line.strip(), service))
        else:
            chunk.append(line)
        text = "\n".join(chunk)
        continued = line.rstrip().endswith("\\") or text.count("'") % 2 == 1
    if chunk and "\n".join(chunk).strip():
        steps.append(Step("\n".join(chunk)))
    if expected is not None and steps:
        steps[-1] = Step(steps[-1].command, steps[-1].service, expected)
    return tuple(steps)


def console_steps(source: str) -> tuple[Step, ...]:
    """``$ command`` lines (``\\`` continues one), each followed by the output it prints."""
    commands: list[tuple[list[str], list[str]]] = []
    continuing = False
    for line in source.splitlines():
        if continuing:
            commands[-1][0].append(line)
        elif line.startswith("$ "):
            commands.append(([line[2:]], []))
        elif commands:
            commands[-1][1].append(line)
        else:
            raise ValueError(f"console block output before any `$ ` command: {line!r}")
        continuing = line.rstrip().endswith("\\")
    steps = []
    for command_lines, output in commands:
        command = "\n".join(command_lines)
        service = _service(command)
        shown = "\n".join(output)
        steps.append(Step(command, service, shown if shown.strip() or service is None else None))
    return tuple(steps)


class ShellBlockParser:
    """The sybil parser: a region per shell block, its evaluator the document's stack."""

    def __init__(self, evaluator: "object") -> None:
        self.lexer = FencedCodeBlockLexer(
            language="|".join(LANGUAGES), mapping={"language": "language", "source": "source"}
        )
        self.evaluator = evaluator

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexer(document):
            language = str(region.lexemes["language"])
            source = str(region.lexemes["source"])
            line = document.text.count("\n", 0, region.start) + 1
            if language == "console":
                steps = console_steps(source)
                end = region.end
            else:
                shown = OUTPUT_BLOCK.match(document.text, region.end)
                steps = script_steps(source, shown["output"] if shown else None)
                end = shown.end() if shown else region.end
            yield Region(region.start, end, ShellBlock(language, source, line, steps), self.evaluator)  # type: ignore[arg-type]


def is_shell_block(example: Example) -> bool:
    return isinstance(example.parsed, ShellBlock)


# --- the tolerant matcher -----------------------------------------------------------------------

KINDS = {
    "time": r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "hex": r"\b[0-9a-fA-F]{12,}\b",
    "duration": r"\b\d+(?:\.\d+)?[ ]?(?:ms|s)\b",
}
VARIABLE = re.compile("|".join([r"(?P<any>\.\.\.|…)", *(f"(?P<{k}>{v})" for k, v in KINDS.items())]))


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")


def pattern(expected: str) -> re.Pattern[str]:
    """The shown output as a regular expression, by the rule in the module docstring."""
    parts: list[str] = []
    text = _normal(expected)
    position = 0
    for match in VARIABLE.finditer(text):
        parts.append(re.escape(text[position : match.start()]))
        kind = match.lastgroup or "any"
        if kind == "any":
            # After a word (an ID's prefix, `smoke-…`) it stands for the generated rest of the ID.
            after_word = match.start() > 0 and re.match(r"[\w-]", text[match.start() - 1])
            parts.append(r"[\w.:-]+" if after_word and match[0] == "…" else r".*?")
        else:
            parts.append(f"(?:{KINDS[kind]})")
        position = match.end()
    parts.append(re.escape(text[position:]))
    return re.compile("".join(parts), re.S)


def matches(expected: str, actual: str) -> bool:
    return pattern(expected).fullmatch(_normal(actual)) is not None
