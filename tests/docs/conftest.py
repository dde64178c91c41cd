"""Docs as tests: every shell block of README.md and docs/*.md, run by sybil in document order
against the stack it documents (``stack.py``), its shown output checked (``shell_blocks.py``).

A block that cannot run here is preceded in the markdown by sybil's own directive,
``<!-- skip: next "the exact reason" -->``; pytest reports it skipped with that reason, and
``tests/conftest.py`` prints how many blocks ran and how many were skipped.

Under xdist a document's blocks go to one worker together (``DocumentsTogether`` in
tests/conftest.py): they run in order, sharing one stack. pytest collects the documents through this conftest
(they live outside tests/): ``pytest tests/docs`` runs them all.
"""

from pathlib import Path
from typing import Any

import pytest
from sybil import Example, Sybil
from sybil.integration.pytest import SybilFile
from sybil.parsers.markdown import SkipParser

from tests.docs.shell_blocks import ShellBlock, ShellBlockParser, is_shell_block
from tests.docs.stack import ROOT, DocumentStack
from tests.support.doc_blocks import DOC_BLOCK

# What each document's blocks need, beyond the venv (pyproject.toml's tiers).
TIERS: dict[str, tuple[str, ...]] = {"docs/local-stack.md": ("emulators",)}

# Blocks that fail today for a reason being fixed elsewhere: strict, so the fix shows as XPASS
# and the marker has to go. Keyed by document and a text of the block.
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


def evaluate(example: Example) -> None:
    block = example.parsed
    assert isinstance(block, ShellBlock)
    stack = example.namespace.get("stack")
    if stack is None:
        stack = example.namespace["stack"] = DocumentStack()
    stack.run(block)


def teardown(namespace: dict[str, Any]) -> None:
    stack = namespace.pop("stack", None)
    if stack is not None:
        stack.close()


SYBIL = Sybil(parsers=[ShellBlockParser(evaluate), SkipParser()], path=str(ROOT), teardown=teardown)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


class DocumentFile(SybilFile):
    """A document's examples, each shell block marked for its tier and its document's group."""

    def collect(self):  # type: ignore[no-untyped-def]
        name = self.path.relative_to(ROOT).as_posix()
        for item in super().collect():
            # The skip directives too: run without the block they skip, the next one would fail.
            for tier in ("processes", "slow", *TIERS.get(name, ())):
                item.add_marker(getattr(pytest.mark, tier))
            if is_shell_block(item.example):
                item.user_properties.append((DOC_BLOCK, name))
                source = item.example.parsed.source
                for (document, text), reason in KNOWN_FAILURES.items():
                    if document == name and text in source:
                        item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
            yield item


class Documents(pytest.Collector):
    def collect(self):  # type: ignore[no-untyped-def]
        for path in documents():
            yield DocumentFile.from_parent(self, path=path, sybils=[SYBIL])


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    # This conftest is the one file of tests/docs that stands for the documents.
    if file_path == Path(__file__):
        return Documents.from_parent(parent, name="documents")
    return None
