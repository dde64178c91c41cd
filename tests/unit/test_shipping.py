"""What ships holds the app alone: nothing deployed imports the local harness, and nothing the
deployed code imports is left out.

Two artefacts ship: the Function App package (the repository minus ``.funcignore``) and the
Agent's image (what ``agent_worker/Dockerfile`` copies). Each is followed from its entry point
through every first-party import, lazy ones inside functions included.
"""

import ast
import re
from pathlib import Path

import pytest

from tools.deploy_package import deployed_files

ROOT = Path(__file__).resolve().parents[2]
# The local stack and the tools around it: they may import the app, never the reverse.
HARNESS = {"devhost", "simulator", "demo", "testing", "tests", "bench", "tools", "ops", "emulators"}
APP_PACKAGES = {"activities", "adapters", "domain", "orchestrators", "services"}


def _module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(path: Path, package: str) -> set[str]:
    """First-party module names ``path`` imports, at any depth in the file."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], module])
                module = module.strip(".")
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return {n for n in names if _module_file(n) is not None}


def import_closure(entry: str) -> set[str]:
    """Every first-party module ``entry`` reaches, with the packages that hold them."""
    seen: set[str] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages run first
        path = _module_file(name)
        assert path is not None, name
        package = name if path.name == "__init__.py" else ".".join(parts[:-1])
        todo += sorted(_imported(path, package) - seen)
    return seen


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_the_function_app_imports_only_what_ships() -> None:
    reached = _tops(import_closure("function_app"))
    assert not reached & HARNESS, f"the app imports the local harness: {sorted(reached & HARNESS)}"
    assert reached == APP_PACKAGES | {"function_app"}


def test_the_deployment_package_is_exactly_the_app() -> None:
    shipped = {p.parts[0] for p in deployed_files(ROOT)}
    assert shipped == APP_PACKAGES | {"function_app.py", "host.json", "requirements.txt"}


def test_the_package_leaves_out_caches_and_local_settings(tmp_path: Path) -> None:
    shipped = [str(p) for p in deployed_files(ROOT)]
    assert not [p for p in shipped if "__pycache__" in p or p.endswith(".pyc")]
    assert not [p for p in shipped if "local.settings" in p]


def _dockerfile_copies() -> set[str]:
    text = (ROOT / "agent_worker" / "Dockerfile").read_text()
    copied = {m.rstrip("/") for line in re.findall(r"^COPY (.+)$", text, re.M) for m in line.split()[:-1]}
    return {c for c in copied if (ROOT / c).is_dir()}


def test_the_agent_image_copies_exactly_what_the_agent_imports() -> None:
    reached = _tops(import_closure("agent_worker.__main__"))
    assert not reached & HARNESS, f"the agent imports the local harness: {sorted(reached & HARNESS)}"
    assert _dockerfile_copies() == reached


@pytest.mark.parametrize("package", sorted(APP_PACKAGES | {"agent_worker"}))
def test_no_shipped_module_imports_the_harness(package: str) -> None:
    """Stricter than the closures: a module nothing imports yet may not reach for it either."""
    for path in sorted((ROOT / package).rglob("*.py")):
        dotted = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        bad = _tops(_imported(path, dotted.rsplit(".", 1)[0])) & HARNESS
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"
