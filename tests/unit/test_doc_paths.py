"""Every repository path the docs cite exists (harness/tools/doc_paths.py)."""

from pathlib import Path

from harness.tools.doc_paths import problems

ROOT = Path(__file__).resolve().parents[2]


def test_every_path_the_docs_cite_exists() -> None:
    assert problems(ROOT) == []


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_moved_file_is_reported_with_its_page_and_line(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            "adapters/sql/orders.py": "def get(): ...\n",
            "README.md": "# R\n\nSee `adapters/sql_orders.py`.\n",
        },
    )
    assert problems(root) == [
        "README.md:3 — cites adapters/sql_orders.py, which does not exist — fix the path or drop it"
    ]


def test_a_name_the_file_no_longer_holds_is_reported(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {"adapters/sql/orders.py": "def get(): ...\n", "docs/a.md": "`adapters/sql/orders.py` (`put`)\n"},
    )
    assert problems(root) == [
        "docs/a.md:1 — cites put in adapters/sql/orders.py, which does not contain it — fix the name"
    ]


def test_page_relative_ignored_and_foreign_paths_pass(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            ".gitignore": ".data/\nlocal.settings.json\n",
            "harness/devhost/host.py": "",
            "harness/devhost/README.md": (
                "`host.py`, `.data/state.db`, `HTTP/1.1`, `azure/core/pipeline/x.py`\n"
            ),
            "README.md": "`local.settings.json` and `harness/devhost/`\n",
        },
    )
    assert problems(root) == []
