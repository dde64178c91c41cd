"""What tests share lives in plain modules under tests/support/ (fixtures in conftest.py), so no
module of the tests, the benchmarks or the demo imports from a test module or a conftest: a helper
kept in a test module is found only by reading its tests, and a test module or conftest imported
elsewhere ties one file's tests to another's. Imports inside functions count; the rule is also
run on sources that break it, and must fail there.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ("tests", "harness/bench", "harness/demo")


def _pytest_loads(part: str) -> bool:
    # The files pytest loads itself: test modules (test_*.py, *_test.py) and conftest.py.
    return part.startswith("test_") or part.endswith("_test") or part == "conftest"


def _from_a_test_module(name: str) -> bool:
    """Whether a dotted import is, or is in, a test module or a conftest of ours (``tests.…``, a
    relative or a bare name); a library's ``aiohttp.test_utils`` is not ours."""
    parts = name.split(".")
    ours = parts[0] in ("", "tests") or _pytest_loads(parts[0])
    return ours and any(map(_pytest_loads, parts))


def imports_of_tests(source: str, filename: str = "<source>") -> list[str]:
    """The dotted names ``source`` imports that are, or come from, a test module or a conftest
    (leading dots for a relative import)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            prefix = f"{module}." if node.module else module
            names = [prefix + alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if _from_a_test_module(name)]
    return found


def problems(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)} imports {name}: move it to a module under tests/support/"
        for top in CHECKED
        for path in sorted((root / top).rglob("*.py"))
        for name in imports_of_tests(path.read_text(), str(path))
    ]


def test_no_module_imports_from_a_test_module_or_a_conftest() -> None:
    assert all((ROOT / top).is_dir() for top in CHECKED)
    assert problems(ROOT) == []


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("from tests.unit.test_messages import body", "tests.unit.test_messages.body"),
        ("from tests.iac.test_iac import REPO as ROOT", "tests.iac.test_iac.REPO"),
        ("import tests.orchestrators.test_agent_replies", "tests.orchestrators.test_agent_replies"),
        ("from tests.agent import test_agent", "tests.agent.test_agent"),
        ("from tests.conftest import loop", "tests.conftest.loop"),
        ("from tests.iac import conftest", "tests.iac.conftest"),
        ("from .test_iac import edit", ".test_iac.edit"),
        ("from . import conftest", ".conftest"),
        ("import conftest", "conftest"),
        ("from tests.bench.load_test import run", "tests.bench.load_test.run"),
        ("def later():\n    from tests.unit.test_messages import line", "tests.unit.test_messages.line"),
    ],
)
def test_each_kind_of_import_from_tests_is_found(source: str, name: str) -> None:
    assert imports_of_tests(source) == [name]


@pytest.mark.parametrize(
    "source",
    [
        "from tests.support.orders import body, line",
        "import tests.support.iac",
        "from tests.support import histories",
        "import pytest\nfrom _pytest.pytester import Pytester",
        "from aiohttp.test_utils import TestClient",
        "text = 'from tests.conftest import loop'",  # a source a test writes, not an import
    ],
)
def test_imports_from_support_and_libraries_are_fine(source: str) -> None:
    assert imports_of_tests(source) == []


def test_a_copy_with_a_test_module_import_fails_naming_it(tmp_path: Path) -> None:
    for top in CHECKED:
        (tmp_path / top).mkdir(parents=True)
    (tmp_path / "tests" / "unit").mkdir()
    (tmp_path / "tests" / "unit" / "test_a.py").write_text("def helper() -> int:\n    return 1\n")
    (tmp_path / "tests" / "unit" / "test_b.py").write_text("from tests.unit.test_a import helper\n")
    (tmp_path / "harness" / "demo" / "run.py").write_text("from tests.conftest import loop\n")
    assert problems(tmp_path) == [
        "tests/unit/test_b.py imports tests.unit.test_a.helper: move it to a module under tests/support/",
        "harness/demo/run.py imports tests.conftest.loop: move it to a module under tests/support/",
    ]
