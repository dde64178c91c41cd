"""Copies of the repository for the IaC tests to break, and the checkers run over them
(harness/tools/iac, each in its own venv, as `make iac` runs it)."""

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BICEP_PYTHON = REPO / ".venv-bicep" / "bin" / "python"
CHECKOV_PYTHON = REPO / ".venv-checkov" / "bin" / "python"

NO_BICEP = ".venv-bicep/bin/python is missing: run `make iac-venvs` (`make test` always creates it)"
NO_CHECKOV = ".venv-checkov/bin/python is missing: run `make iac-venvs` (`make test` always creates it)"
# Not skips: `make test` always builds both venvs, so a missing one is a broken set-up, and the
# `iac` marker keeps these tests out of `make check` (tests/iac/conftest.py fails them clearly).
needs_bicep = pytest.mark.iac
needs_checkov = pytest.mark.iac

# What the checkers read: infra/ and the code and config files they cross-check.
CHECKED = [
    "infra",
    "function_app.py",
    "settings.py",
    "domain/apps.py",
    "agent_worker/settings.py",
    "adapters/cosmos/state_store.py",
    "adapters/storage/compensation_log.py",
    "host.json",
    "harness/emulators/servicebus-config/Config.json",
    "local.settings.sample.json",
    "pyproject.toml",
    "agent_worker/Dockerfile",
    "harness/tools/iac/checkov-skips.txt",
    "docs/deploying.md",
]


def copy_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel in CHECKED:
        source, target = REPO / rel, root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        elif source.is_file():
            shutil.copy2(source, target)
    return root


def run(python: Path, module: str, root: Path, *extra: str) -> tuple[int, list[str]]:
    completed = subprocess.run(
        [str(python), "-m", module, str(root), *extra],
        cwd=REPO,  # the checker's own code comes from this repository; ROOT is what it checks
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode in (0, 1), completed.stderr
    return completed.returncode, completed.stdout.splitlines()


@cache
def baseline(tmp_root: Path) -> frozenset[str]:
    """The problems of an unbroken copy, with its paths made relative."""
    _, lines = run(BICEP_PYTHON, "harness.tools.iac", tmp_root)
    return frozenset(lines)


def assert_fails(root: Path, *needles: str, clean: Path) -> list[str]:
    """The broken copy fails with a new problem line that contains every needle."""
    before = baseline(clean)
    code, lines = run(BICEP_PYTHON, "harness.tools.iac", root)
    new = [line for line in lines if line not in before and " — " in line]
    assert code == 1, f"expected a failure naming {needles}, got exit {code}:\n" + "\n".join(lines)
    matching = [line for line in new if all(needle in line for needle in needles)]
    assert matching, f"no new problem names {needles}; new problems:\n" + "\n".join(new)
    return matching


def edit(path: Path, old: str, new: str, *, count: int = 1) -> None:
    text = path.read_text(encoding="utf-8")
    if old not in text:
        pytest.fail(f"{old!r} is not in {path.name} any more: update this test to the current infra")
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def delete_line(path: Path, pattern: str) -> str:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    regex = re.compile(pattern)
    for index, line in enumerate(lines):
        if regex.search(line):
            del lines[index]
            path.write_text("".join(lines), encoding="utf-8")
            return line
    pytest.fail(f"no line matches {pattern!r} in {path.name}: update this test to the current infra")


def delete_resource(path: Path, symbol: str) -> None:
    """``path`` without the resource declared as ``symbol``."""
    text = path.read_text(encoding="utf-8")
    block = re.search(rf"^resource {symbol} .*?^}}\n", text, re.M | re.S)
    if block is None:
        pytest.fail(f"no resource {symbol} in {path.name}: update this test to the current infra")
    path.write_text(text[: block.start()] + text[block.end() :], encoding="utf-8")


def infra_file(root: Path, *needles: str) -> Path:
    """The Bicep file that contains every needle (a resource type: "'Microsoft.X/y@")."""
    for path in sorted((root / "infra").rglob("*.bicep")):
        text = path.read_text(encoding="utf-8")
        if all(needle in text for needle in needles):
            return path
    pytest.fail(f"no Bicep file contains {needles!r}: update this test to the current infra")


def declaring(root: Path, resource_type: str) -> Path:
    """The Bicep file that declares (not just references) a resource of this type."""
    pattern = re.compile(rf"^resource \w+ '{re.escape(resource_type)}@[^']*' = (?!.*existing)", re.M)
    for path in sorted((root / "infra").rglob("*.bicep")):
        if pattern.search(path.read_text(encoding="utf-8")):
            return path
    pytest.fail(f"no Bicep file declares a {resource_type}: update this test to the current infra")


def function_app_file(root: Path) -> Path:
    return infra_file(root, "functionAppConfig")
