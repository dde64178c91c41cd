"""Every requirement code the repository cites has a section in docs/requirements.md, and every
path and name that page cites exists (harness/tools/requirement_codes.py)."""

from pathlib import Path

import pytest

from harness.tools.requirement_codes import citations, codes_in, headings, main, problems

ROOT = Path(__file__).resolve().parents[2]


def test_the_repository_cites_only_codes_the_requirements_page_defines() -> None:
    assert problems(ROOT) == []


def test_the_page_has_one_section_per_requirement_of_the_pattern() -> None:
    defined = headings((ROOT / "docs" / "requirements.md").read_text())
    expected = [f"R{n}" for n in range(1, 13)] + [f"C{n}" for n in range(1, 13)]
    assert defined == [*expected, *(f"E{n}" for n in range(1, 19))]


@pytest.mark.parametrize(
    ("text", "codes"),
    [
        ("fencing (E5)", {"E5"}),
        ("The Supervisor (E13-E15, R6-R7)", {"E13", "E14", "E15", "R6", "R7"}),
        ("Blob leases (R10–R11)", {"R10", "R11"}),
        ("the Agent (R2-4)", {"R2", "R3", "R4"}),
        ("no control characters (C0, DEL, C1)", {"C1"}),  # numbering starts at 1
        ("ruff's E501 and SQLSTATE 23505", set()),
        ("PRECONDITION, RE5, E5x", set()),
    ],
)
def test_codes_in_a_line(text: str, codes: set[str]) -> None:
    assert codes_in(text) == codes


def _repo(tmp_path: Path, page: str, files: dict[str, str]) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "requirements.md").write_text(page)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_cited_code_without_a_section_is_reported_where_it_is_cited(tmp_path: Path) -> None:
    page = "# Requirements\n\n### R1 — Scheduler\n"
    root = _repo(tmp_path, page, {"a/b.py": '"""Hello (R1).\n\nSee R2."""\n'})
    [problem] = problems(root)
    assert problem.startswith("a/b.py:3 — cite R2, which docs/requirements.md does not define")


def test_dot_directories_and_dependencies_are_not_read(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        "### R1 — Scheduler\n",
        {".venv/lib/x.py": "R9\n", "node_modules/y/z.js": "R9\n", "docs/notes.md": "R1\n"},
    )
    assert [(c.code, c.path) for c in citations(root)] == [("R1", "docs/notes.md")]
    assert problems(root) == []


def test_a_code_with_two_sections_is_reported(tmp_path: Path) -> None:
    root = _repo(tmp_path, "### C2 — Budget\n\n### C2 — Again\n", {})
    assert problems(root) == ["docs/requirements.md — C2 has 2 headings — keep one"]


def test_a_missing_path_or_name_on_the_page_is_reported(tmp_path: Path) -> None:
    page = (
        "### E5 — Fencing\n\n"
        "- *Where*: `services/fenced.py` (`fenced_update`, `gone_function`); `services/moved.py`;\n"
        "  `services/` (`anything`); `OrderID:step`, `LockedBy` are not paths.\n"
    )
    root = _repo(tmp_path, page, {"services/fenced.py": "def fenced_update() -> None: ...\n"})
    assert problems(root) == [
        "docs/requirements.md:3 — cites gone_function in services/fenced.py, which does not contain it"
        " — fix the name or drop it",
        "docs/requirements.md:3 — cites services/moved.py, which does not exist — fix the path or drop it",
    ]


def test_the_command_line_exits_1_on_a_problem_and_0_when_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path, "### R1 — Scheduler\n", {"x.md": "R1, R3\n"})
    assert main([str(root)]) == 1
    assert "x.md:1 — cite R3" in capsys.readouterr().out
    (root / "x.md").write_text("R1\n")
    assert main([str(root)]) == 0
    assert main([str(root), "--list"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "R1: x.md:1"
