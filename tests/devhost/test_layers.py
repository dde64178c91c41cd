"""devhost knows nothing of the app it hosts: it may use the local Service Bus, the clocks and the
settings reader from ``adapters/`` (devhost/README.md), never the app's domain or code."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THE_APP = {
    "domain",
    "services",
    "orchestrators",
    "activities",
    "function_app",
    "agent_worker",
    "ops",
    "simulator",
}


def test_devhost_imports_nothing_of_the_app() -> None:
    files = sorted((ROOT / "devhost").rglob("*.py"))
    assert files
    for path in files:
        nodes = list(ast.walk(ast.parse(path.read_text(), str(path))))
        modules = {alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
        modules |= {node.module for node in nodes if isinstance(node, ast.ImportFrom) and node.module}
        app = sorted(m for m in modules if m.split(".")[0] in THE_APP)
        assert not app, f"{path.relative_to(ROOT)} imports {app}"
