"""The house's import rules: domain/ and services/ hold pure logic (no Azure SDK, no Functions, no
I/O libraries), and the layers import one way.

A layer rule is about everything a module reaches, not only what it names: a service that
imports ``bootstrap`` reaches the adapters through it (devhost's rule stops at what it may use:
adapters/ and settings.py, whatever they import). Imports inside functions count (a lazy
import runs too). Each rule is also run on a copy of the code with one import that breaks it,
and must fail there: a rule that cannot fail checks nothing.
"""

import ast
import graphlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.tools import shipping

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("azure", "pyodbc", "sqlite3", "requests", "aiohttp")

# The local harness: it may import the app, never the reverse.
HARNESS = frozenset({"harness", "simulator", "ops", "tests"})
# What ships: the Function App's package and the agent's image.
SHIPPED = (
    "function_app",
    "first_engine_blueprint",
    "bootstrap",
    "settings",
    "activities",
    "contracts",
    "adapters",
    "domain",
    "orchestrators",
    "services",
    "agent_worker",
)
# devhost hosts the app without knowing it: it may use adapters/ (the local Service Bus, the
# clocks, the settings reader) and settings.py (their SettingsError), whatever those import.
DEVHOST_USES = frozenset({"adapters", "settings"})
THE_APP = frozenset({*SHIPPED, "ops", "simulator"}) - DEVHOST_USES


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


# --- the layers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    says: str
    # The top-level packages and modules whose every module the rule is about.
    layer: tuple[str, ...]
    # Whether a first-party module, by its top-level name, is one the layer may not reach.
    forbids: Callable[[str], bool]
    # Top-level names the layer may import whatever they reach in turn: a route stops there.
    uses: frozenset[str] = frozenset()


RULES = {
    "domain": Rule(
        "domain imports nothing of the project but domain", ("domain",), lambda top: top != "domain"
    ),
    "orchestrators": Rule(
        "orchestrators import neither services nor adapters (they must replay deterministically)",
        ("orchestrators",),
        {"services", "adapters"}.__contains__,
    ),
    "contracts": Rule(
        "contracts import nothing of the project but domain (a leaf every layer may use)",
        ("contracts",),
        lambda top: top not in {"contracts", "domain"},
    ),
    "below": Rule(
        "nothing below the orchestrators imports them (the names and contracts they share are in contracts/)",
        ("domain", "contracts", "services", "adapters", "activities", "settings", "agent_worker"),
        {"orchestrators"}.__contains__,
    ),
    "services": Rule("services do not import adapters", ("services",), {"adapters"}.__contains__),
    "adapters": Rule("adapters do not import services", ("adapters",), {"services"}.__contains__),
    "shipped": Rule("nothing shipped imports the local harness", SHIPPED, HARNESS.__contains__),
    "devhost": Rule(
        "devhost imports nothing of the app but adapters and settings",
        ("harness/devhost",),
        THE_APP.__contains__,
        DEVHOST_USES,
    ),
}


def _modules(root: Path, top: str) -> list[str]:
    """The modules of a top-level package (or the one module), by the files ``root`` holds."""
    if (root / f"{top}.py").is_file():
        return [f"{top}.py"]
    found = []
    for folder, folders, files in os.walk(root / top):
        folders[:] = [
            f for f in folders if f not in ("__pycache__", "node_modules")
        ]  # the emulators' npm tree
        found += [(Path(folder) / f).relative_to(root).as_posix() for f in files if f.endswith(".py")]
    return sorted(found)


def _route(root: Path, start: str, rule: Rule) -> list[str] | None:
    """The first import chain from module ``start`` to a module ``rule`` forbids, or None."""
    came_from: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        name = todo.pop(0)
        top = name.split(".")[0]
        if rule.forbids(top):
            route = [name]
            while (previous := came_from[route[-1]]) is not None:
                route.append(previous)
            return route[::-1]
        if top in rule.uses:
            continue
        relative = shipping.module_file(root, name)
        if relative is None:
            continue  # a namespace package: no code of its own
        parts = name.split(".")
        parents = [".".join(parts[:i]) for i in range(1, len(parts))]  # their __init__ runs first
        imported = {shipping.first_party(root, n) for n in shipping.imported_names(root, relative)}
        for module in [*parents, *sorted(m for m in imported if m is not None)]:
            if module not in came_from:
                came_from[module] = name
                todo.append(module)
    return None


def layer_problems(root: Path, rule: Rule) -> list[str]:
    problems = []
    for top in rule.layer:
        for relative in _modules(root, top):
            route = _route(root, shipping.module_name(relative), rule)
            if route is not None:
                problems.append(f"{relative}: {rule.says}, but it reaches {' -> '.join(route)}")
    return problems


@pytest.mark.parametrize("rule", RULES)
def test_the_layers_import_one_way(rule: str) -> None:
    assert layer_problems(ROOT, RULES[rule]) == []


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_is_about_modules_that_exist(rule: str) -> None:
    for top in RULES[rule].layer:
        assert _modules(ROOT, top), f"{top} holds no module: the rule would check nothing"


# --- mutations: a copy of the code, with one import that breaks a rule ---------------------------


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("layers")
    for top in [*SHIPPED, *sorted(HARNESS - {"tests"})]:
        for relative in _modules(ROOT, top):
            (copy / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / relative, copy / relative)
    return copy


@pytest.fixture
def copy(clean: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(clean, tmp_path / "repo"))


def _add_import(path: Path, statement: str) -> None:
    text = path.read_text()
    assert statement not in text
    path.write_text(f"{text}\n{statement}\n")


def test_the_unmutated_copy_keeps_every_rule(copy: Path) -> None:
    assert [p for rule in RULES.values() for p in layer_problems(copy, rule)] == []


@pytest.mark.parametrize(
    ("rule", "module", "statement", "route"),
    [
        ("domain", "domain/states.py", "from services import fenced", "domain.states -> services"),
        ("domain", "domain/states.py", "import settings", "domain.states -> settings"),
        ("orchestrators", "orchestrators/order_attempt.py", "import adapters.clock", "-> adapters"),
        ("contracts", "contracts/names.py", "from services import fenced", "contracts.names -> services"),
        ("below", "services/scheduling.py", "import orchestrators.order_attempt", "-> orchestrators"),
        (
            "below",
            "activities/steps.py",
            "def _later() -> None:\n    import orchestrators",
            "-> orchestrators",
        ),
        ("services", "services/fenced.py", "from adapters.clock import host_clock", "-> adapters"),
        # Through the composition root: the rule is about what a service reaches.
        ("services", "services/fenced.py", "import bootstrap", "services.fenced -> bootstrap -> adapters"),
        ("adapters", "adapters/clock.py", "from services import fenced", "adapters.clock -> services"),
        ("shipped", "settings.py", "import harness.devhost.clock", "settings -> harness.devhost"),
        (
            "shipped",
            "agent_worker/remote.py",
            "from harness.standins import ports",
            "agent_worker.remote -> harness.standins",
        ),
        ("shipped", "function_app.py", "import harness.tools.shipping", "function_app -> harness.tools"),
        (
            "devhost",
            "harness/devhost/clock.py",
            "from domain import ports",
            "harness.devhost.clock -> domain",
        ),
        (
            "devhost",
            "harness/devhost/indexing.py",
            "import function_app",
            "harness.devhost.indexing -> function_app",
        ),
    ],
)
def test_each_rule_fails_on_a_copy_that_breaks_it(
    copy: Path, rule: str, module: str, statement: str, route: str
) -> None:
    _add_import(copy / module, statement)
    problems = layer_problems(copy, RULES[rule])
    assert any(p.startswith(f"{module}: {RULES[rule].says}") and route in p for p in problems), problems


def test_an_import_inside_a_function_counts(copy: Path) -> None:
    _add_import(copy / "services" / "fenced.py", "def _later() -> None:\n    import adapters.clock  # noqa")
    assert any(p.startswith("services/fenced.py:") for p in layer_problems(copy, RULES["services"]))


# --- no circles: a module of what ships never reaches itself through its own imports -----------


def import_cycles(root: Path) -> list[list[str]]:
    """Every import circle among the shipped modules (lazy imports included), one per edge that
    closes one: graphlib names a circle, the edge is dropped, and the search goes on."""
    graph: dict[str, set[str]] = {}
    for top in SHIPPED:
        for relative in _modules(root, top):
            name = shipping.module_name(relative)
            imported = {shipping.first_party(root, n) for n in shipping.imported_names(root, relative)}
            # A package's own __init__ runs before its modules: that edge is no circle.
            graph[name] = {m for m in imported if m and m != name and not name.startswith(f"{m}.")}
    circles = []
    while True:
        try:
            graphlib.TopologicalSorter(graph).prepare()
        except graphlib.CycleError as error:
            circle: list[str] = error.args[1]
            circles.append(circle)
            graph[circle[1]].discard(circle[0])  # graphlib lists a circle as [a, ..., b, a], b -> a
        else:
            return circles


def test_what_ships_has_no_import_circle() -> None:
    assert import_cycles(ROOT) == []


def test_a_circle_through_a_lazy_import_is_found(copy: Path) -> None:
    _add_import(
        copy / "adapters" / "sql" / "schema.py", "def _later() -> None:\n    import adapters.sql.orders"
    )
    assert [set(circle) for circle in import_cycles(copy)] == [{"adapters.sql.orders", "adapters.sql.schema"}]
