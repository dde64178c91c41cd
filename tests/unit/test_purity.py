"""domain/ and services/ hold pure logic: no Azure SDK, no Functions, no I/O libraries."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("azure", "pyodbc", "sqlite3", "requests", "aiohttp")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("package", ["domain", "services"])
def test_pure_packages_import_no_azure_or_io_library(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    for path in files:
        bad = {n for n in _imports(path) if n.split(".")[0] in FORBIDDEN}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
