"""What ships is exactly what runs (harness/tools/shipping.py).

Three artefacts ship: the Function App package (the repository minus ``.funcignore``), the
Agent's image (what ``agent_worker/Dockerfile`` copies of what ``.dockerignore`` admits) and the
simulator's image (what ``simulator/Dockerfile`` copies of what its own
``simulator/Dockerfile.dockerignore`` admits). Their
module files must be the import closures of their entry points, lazy imports included, and what
their code imports directly must be pinned in their own requirements. The checks run on the
repository, and on a copy with one mistake put in, which each must catch.
"""

import ast
import shutil
from pathlib import Path

import pytest

from harness.tools import shipping
from harness.tools.deploy_package import deployed_files

ROOT = Path(__file__).resolve().parents[2]
# The local stack and the tools around it: they may import the app, never the reverse.
HARNESS = {"harness", "simulator", "tests", "ops"}
APP_PACKAGES = {"activities", "adapters", "contracts", "domain", "orchestrators", "services"}
# The modules at the top, beside function_app.py: what joins the packages.
APP_MODULES = {"function_app.py", "first_engine_blueprint.py", "bootstrap.py", "settings.py"}
PROFILES = ("adapters/azure_profile.py", "adapters/embedded_profile.py")
# Where imports wait inside functions: the composition root picks a profile, then the Azure
# profile imports its SDKs.
LAZY_IMPORTERS = ("bootstrap.py", "adapters/azure_profile.py")


def test_the_package_holds_exactly_the_apps_modules() -> None:
    assert shipping.package_problems(ROOT) == []


def test_the_package_is_the_app_and_its_two_files() -> None:
    shipped = {p.parts[0] for p in deployed_files(ROOT)}
    assert shipped == APP_PACKAGES | APP_MODULES | {"host.json", "requirements.txt"}


def test_the_package_leaves_out_caches_and_local_settings() -> None:
    shipped = [str(p) for p in deployed_files(ROOT)]
    assert not [p for p in shipped if "__pycache__" in p or p.endswith(".pyc")]
    assert not [p for p in shipped if "local.settings" in p]


def test_every_funcignore_line_means_the_same_to_core_tools_and_azd() -> None:
    assert shipping.funcignore_problems(ROOT) == []


def _lazy_imports(relative: str) -> set[str]:
    """Names imported inside functions: run only when a profile is picked, never at import."""
    tree = ast.parse((ROOT / relative).read_text())
    return {
        f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }


def test_both_profiles_and_what_they_import_lazily_are_in_the_closure() -> None:
    reached = shipping.closure_files(ROOT, shipping.APP_ENTRY)
    assert set(PROFILES) <= reached
    pinned = shipping.pins(ROOT, shipping.APP_REQUIREMENTS)
    for relative in LAZY_IMPORTERS:
        lazy = _lazy_imports(relative)
        assert lazy, f"{relative} imports nothing lazily: this test checks nothing"
        ours = {m for m in (shipping.first_party(ROOT, n) for n in lazy) if m is not None}
        assert {shipping.module_file(ROOT, m) for m in ours} <= reached
        third_party = {n for n in lazy if shipping.first_party(ROOT, n) is None}
        theirs = {d for n in third_party for d in shipping.distributions_of(n)}
        assert theirs <= pinned.keys(), f"{relative} imports {sorted(theirs - pinned.keys())} unpinned"


def test_the_image_holds_exactly_the_agents_modules() -> None:
    assert shipping.image_problems(ROOT) == []


def test_the_image_copies_only_packages_the_agent_reaches() -> None:
    packages = {f.split("/")[0] for f in shipping.closure_files(ROOT, shipping.AGENT_ENTRY)}
    copied = {c.rstrip("/") for c in shipping.dockerfile_copies(ROOT)} - {shipping.AGENT_REQUIREMENTS}
    assert copied == packages
    assert not packages & HARNESS


def test_every_direct_import_is_pinned_and_every_pin_imported() -> None:
    assert shipping.requirement_problems(ROOT) == []


def test_the_sdks_core_and_opentelemetry_are_pinned_not_transitive() -> None:
    """What arrived only with another distribution before: imported directly, so pinned."""
    pinned = shipping.pins(ROOT, shipping.APP_REQUIREMENTS)
    assert {"azure-core", "opentelemetry-api", "opentelemetry-sdk", "requests", "urllib3"} <= pinned.keys()


def test_namespace_packages_resolve_to_the_distribution_of_the_module() -> None:
    assert shipping.distributions_of("azure.core.MatchConditions") == {"azure-core"}
    assert shipping.distributions_of("opentelemetry.trace") == {"opentelemetry-api"}
    assert shipping.distributions_of("opentelemetry.sdk.trace.TracerProvider") == {"opentelemetry-sdk"}
    assert shipping.distributions_of("azure.monitor.opentelemetry.configure_azure_monitor") == {
        "azure-monitor-opentelemetry"
    }


def test_no_shipped_module_imports_a_dev_only_package() -> None:
    assert shipping.dev_only_problems(ROOT) == []


def test_the_dev_only_set_is_derived_from_the_requirements() -> None:
    dev = shipping.installed_by(shipping.pins(ROOT, shipping.DEV_REQUIREMENTS))
    app = shipping.installed_by(shipping.pins(ROOT, shipping.APP_REQUIREMENTS))
    agent = shipping.installed_by(shipping.pins(ROOT, shipping.AGENT_REQUIREMENTS))
    assert {"rich", "pytest", "croniter", "pathspec"} <= dev - app - agent
    assert "aiohttp" in agent
    assert "aiohttp" in app  # the Durable SDK's client: installed, but not the app's to import


# That no shipped module, reached or not, imports the harness: a layer rule (test_purity.py).


# --- mutations: a copy of what the checks read, with one mistake put in -------------------------


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The files the checks read: both artefacts' files and the files that define them."""
    defining = {
        ".funcignore",
        ".dockerignore",
        shipping.DOCKERFILE,
        shipping.SIMULATOR_DOCKERFILE,
        f"{shipping.SIMULATOR_DOCKERFILE}.dockerignore",
        shipping.APP_REQUIREMENTS,
        shipping.AGENT_REQUIREMENTS,
        shipping.SIMULATOR_REQUIREMENTS,
        shipping.DEV_REQUIREMENTS,
        shipping.APP_INPUT,
        shipping.AGENT_IMAGE.input,
        shipping.SIMULATOR_IMAGE.input,
        "harness/emulators/servicebus-config/Config.json",  # something for `/harness/emulators/` to leave out
    }
    images = {f for image in shipping.IMAGES for f in shipping.image_files(ROOT, image)}
    for relative in shipping.package_files(ROOT) | images | defining:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, tmp_path / relative)
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer holds {old!r}: the mutation would test nothing"
    path.write_text(text.replace(old, new, 1))


def test_the_unmutated_copy_passes_every_check(copy: Path) -> None:
    assert shipping.problems(copy) == []


def test_an_unanchored_servicebus_line_fails_the_package_check(copy: Path) -> None:
    """The bug this check was written for: a `servicebus/` line, meant for a root folder of that
    name, also left out adapters/servicebus/, so every function failed."""
    _edit(copy / ".funcignore", "\n/simulator/\n", "\n/simulator/\nservicebus/\n")
    problems = shipping.package_problems(copy)
    assert "adapters/servicebus/azure.py: the app imports it, but the package leaves it out" in problems
    assert any("'servicebus/' is not anchored" in p for p in shipping.funcignore_problems(copy))


def test_a_cache_line_for_nested_folders_only_misses_the_root_for_azd(copy: Path) -> None:
    _edit(copy / ".funcignore", "/__pycache__/\n", "")
    assert ".funcignore: __pycache__/function_app.cpython-313.pyc is left out by azd (gitignore) only" in (
        shipping.funcignore_problems(copy)
    )


@pytest.mark.parametrize(
    ("requirements", "pin", "expected"),
    [
        ("requirements.in", "azure-core==", "adapters/resilience.py"),
        ("requirements.in", "opentelemetry-sdk==", "adapters/telemetry_export.py"),
        ("agent_worker/requirements.in", "purgatory==", "agent_worker/worker.py"),
    ],
)
def test_removing_a_pinned_direct_dependency_fails(
    copy: Path, requirements: str, pin: str, expected: str
) -> None:
    path = copy / requirements
    line = next(line for line in path.read_text().splitlines() if line.startswith(pin))
    _edit(path, f"{line}\n", "")
    name = pin.removesuffix("==")
    problems = shipping.requirement_problems(copy)
    assert any(expected in p and f"imports {name}, which {requirements} does not pin" in p for p in problems)


def test_pinning_what_nothing_imports_fails(copy: Path) -> None:
    _edit(copy / "requirements.in", "tenacity==9.2.1\n", "tenacity==9.2.1\nrich==15.0.0\n")
    problems = shipping.requirement_problems(copy)
    expected = (
        "requirements.in: pins rich, which the Function App package never imports (drop it, or say why)"
    )
    assert expected in problems


@pytest.mark.parametrize(
    ("module", "package", "distribution"),
    [
        ("settings.py", "rich", "rich"),  # in both artefacts
        ("bootstrap.py", "croniter", "croniter"),  # the package only
        ("agent_worker/worker.py", "pytest", "pytest"),  # the image only
    ],
)
def test_importing_a_dev_only_package_from_shipped_code_fails(
    copy: Path, module: str, package: str, distribution: str
) -> None:
    path = copy / module
    path.write_text(f"import {package}\n{path.read_text()}")
    problems = shipping.dev_only_problems(copy)
    assert any(
        p.startswith(f"{module}: imports {distribution}, which only requirements-dev.txt installs")
        for p in problems
    )


def test_importing_aiohttp_from_the_app_fails_though_the_durable_sdk_brings_it(copy: Path) -> None:
    path = copy / "services" / "frontend.py"
    path.write_text(f"import aiohttp\n{path.read_text()}")
    assert "services/frontend.py: imports aiohttp, which requirements.in does not pin" in (
        shipping.requirement_problems(copy)
    )


def test_a_dockerignore_that_lets_the_harness_in_fails(copy: Path) -> None:
    (copy / "harness" / "devhost").mkdir(parents=True)
    (copy / "harness" / "devhost" / "__init__.py").write_text("")
    (copy / ".dockerignore").write_text((copy / ".dockerignore").read_text() + "!harness/devhost/\n")
    assert ".dockerignore admits harness/devhost/__init__.py, which agent_worker/Dockerfile never copies" in (
        shipping.image_problems(copy)
    )


def test_an_image_without_a_module_the_agent_imports_fails(copy: Path) -> None:
    _edit(copy / ".dockerignore", "!domain/policy.py\n", "")
    assert "domain/policy.py: the agent imports it, but its image leaves it out" in shipping.image_problems(
        copy
    )


# --- the simulator's image: its own ignore file, its own requirements ----------------------------

SIMULATOR_IGNORE = "simulator/Dockerfile.dockerignore"


def test_the_simulator_image_reads_its_own_ignore_file_not_the_agents() -> None:
    assert shipping.ignore_file(ROOT, shipping.SIMULATOR_IMAGE) == SIMULATOR_IGNORE
    assert shipping.ignore_file(ROOT, shipping.AGENT_IMAGE) == ".dockerignore"
    simulator = shipping.image_files(ROOT, shipping.SIMULATOR_IMAGE)
    assert "adapters/entra_tokens.py" in simulator
    assert "adapters/entra_tokens.py" not in shipping.image_files(ROOT, shipping.AGENT_IMAGE)
    assert not any(f.startswith("agent_worker/") for f in simulator)


def test_a_simulator_image_without_the_token_verifier_fails(copy: Path) -> None:
    _edit(copy / SIMULATOR_IGNORE, "!adapters/entra_tokens.py\n", "")
    assert (
        "adapters/entra_tokens.py: the simulator imports it, but its image leaves it out"
        in shipping.image_problems(copy)
    )


def test_a_simulator_ignore_file_that_lets_the_agent_in_fails(copy: Path) -> None:
    _edit(copy / SIMULATOR_IGNORE, "!simulator/*.py\n", "!simulator/*.py\n!agent_worker/*.py\n")
    assert (
        f"{SIMULATOR_IGNORE} admits agent_worker/remote.py, which simulator/Dockerfile never copies"
        in shipping.image_problems(copy)
    )


def test_the_simulator_needs_pyjwt_pinned(copy: Path) -> None:
    _edit(copy / shipping.SIMULATOR_IMAGE.input, "PyJWT==2.15.1\n", "")
    problems = shipping.requirement_problems(copy)
    assert any(
        "adapters/entra_tokens.py" in p and "imports pyjwt, which simulator/requirements.in does not pin" in p
        for p in problems
    ), problems
