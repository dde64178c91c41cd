"""What ships, checked from a repository root: each check returns its problems, one line each.

Three artefacts ship. The Function App package is the repository minus ``.funcignore``
(``harness/tools/deploy_package.py``); the Agent's image is what ``agent_worker/Dockerfile`` copies out of
the build context that ``.dockerignore`` admits; the simulator's image (a first deployment's
remote service) is what ``simulator/Dockerfile`` copies out of the context its own ignore file,
``simulator/Dockerfile.dockerignore``, admits (BuildKit reads ``<Dockerfile>.dockerignore`` beside
the Dockerfile instead of the root one, so each image's context is exactly its own). For each, the
module files must be exactly the first-party import closure of its entry point (imports inside
functions included), and every third-party distribution its code imports directly must be pinned
in its own requirements file.

The checks take the root as an argument so the tests can run them on a mutated copy as well as
on the repository. ``python -m harness.tools.shipping [ROOT]`` prints the problems and exits 1 on any.
"""

import ast
import importlib.metadata
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pathspec
from packaging.requirements import Requirement

from harness.tools.deploy_package import deployed_files

APP_ENTRY = "function_app"
AGENT_ENTRY = "agent_worker.__main__"
# Each artefact installs a lock (harness/tools/locks.py) compiled from an input of its direct pins: the
# input is what the imports are checked against, the lock is what ships.
APP_REQUIREMENTS = "requirements.txt"
APP_INPUT = "requirements.in"
AGENT_REQUIREMENTS = "agent_worker/requirements.txt"
DEV_REQUIREMENTS = "requirements-dev.txt"
DOCKERFILE = "agent_worker/Dockerfile"
SIMULATOR_ENTRY = "simulator.__main__"
SIMULATOR_REQUIREMENTS = "simulator/requirements.txt"
SIMULATOR_DOCKERFILE = "simulator/Dockerfile"

# What the package holds besides modules: the host's configuration and what Azure installs.
PACKAGE_DATA = frozenset({"host.json", "requirements.txt"})

# Modules the package ships although the Function App never imports them, and why.
SHIPPED_UNREACHED = {
    "adapters/local_settings.py": "the agent's reader of local.settings.json; adapters/ ships whole",
    "adapters/servicebus/agent_queues.py": "the agent's queue adapter, beside the app's Service Bus one",
    "services/operator.py": "the operator CLI's actions (ops/ runs on a workstation); services/ ships whole",
}
# Distributions requirements.in pins although no shipped module imports them, and why.
PINNED_UNIMPORTED = {
    "azure-functions-runtime": "the Python worker itself: the platform runs the version the app pins",
    "cryptography": "PyJWT's RS256 verification: PyJWT imports it, and asks for it only as the crypto extra",
}
# The same for the agent's requirements: it has no runtime beside `python -m agent_worker`.
AGENT_PINNED_UNIMPORTED: dict[str, str] = {}


@dataclass(frozen=True)
class Image:
    """One container image: what builds it, what it runs, what it installs."""

    label: str  # "the agent": who imports what, in a problem's words
    dockerfile: str
    entry: str
    requirements: str
    pinned_unimported: dict[str, str] = field(default_factory=dict)

    @property
    def input(self) -> str:
        """The direct pins its lock is compiled from."""
        return self.requirements.removesuffix(".txt") + ".in"

    @property
    def data(self) -> frozenset[str]:
        """What the image holds besides modules: what its `pip install` reads."""
        return frozenset({self.requirements})


AGENT_IMAGE = Image("the agent", DOCKERFILE, AGENT_ENTRY, AGENT_REQUIREMENTS, AGENT_PINNED_UNIMPORTED)
SIMULATOR_IMAGE = Image(
    "the simulator",
    SIMULATOR_DOCKERFILE,
    SIMULATOR_ENTRY,
    SIMULATOR_REQUIREMENTS,
    {"cryptography": PINNED_UNIMPORTED["cryptography"]},
)
IMAGES = (AGENT_IMAGE, SIMULATOR_IMAGE)

# Paths that exist only at run time (never tracked), so the ignore-file check sees them too.
FUNCIGNORE_PROBES = (
    "local.settings.json",
    "__pycache__/function_app.cpython-313.pyc",
    "adapters/__pycache__/resilience.cpython-313.pyc",
    "adapters/servicebus/__pycache__/azure.cpython-313.pyc",
    ".venv/bin/python",
    ".python_packages/lib/site-packages/x.py",
)


# --- first-party import closures ---------------------------------------------------------------


def module_file(root: Path, name: str) -> str | None:
    """The file (relative, posix) that defines first-party module ``name``, if ``root`` has one."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.relative_to(root).as_posix()
    return None


def module_name(relative: str) -> str:
    parts = relative.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(root: Path, relative: str) -> set[str]:
    """Every dotted name the file imports, at any depth: ``from x import y`` gives ``x.y``, which
    is a module or an attribute of ``x`` (resolved by the caller)."""
    name = module_name(relative)
    package = name if relative.endswith("__init__.py") else name.rpartition(".")[0]
    return set(_names_in((root / relative).read_text(), package))


@cache  # by source text: a mutated copy re-parses only the file that changed
def _names_in(source: str, package: str) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(p for p in [*parent, base] if p)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(names)


def first_party(root: Path, name: str) -> str | None:
    """The longest prefix of ``name`` that is a module of ``root``."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if module_file(root, ".".join(parts[:end])) is not None:
            return ".".join(parts[:end])
    return None


def import_closure(root: Path, entry: str) -> set[str]:
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
        relative = module_file(root, name)
        if relative is None:
            raise ValueError(f"{entry} reaches {name}, which {root} does not define")
        for imported in imported_names(root, relative):
            module = first_party(root, imported)
            if module is not None and module not in seen:
                todo.append(module)
    return seen


def closure_files(root: Path, entry: str) -> set[str]:
    return {f for f in (module_file(root, m) for m in import_closure(root, entry)) if f is not None}


# --- the Function App package ------------------------------------------------------------------


def package_files(root: Path) -> set[str]:
    return {p.as_posix() for p in deployed_files(root)}


def package_problems(root: Path) -> list[str]:
    shipped = package_files(root)
    modules = {f for f in shipped if f.endswith(".py")}
    reached = closure_files(root, APP_ENTRY)
    problems = [f"{f}: the app imports it, but the package leaves it out" for f in sorted(reached - modules)]
    problems += [
        f"{f}: shipped, but the app never imports it (import it, exclude it, or say why in SHIPPED_UNREACHED)"
        for f in sorted(modules - reached - SHIPPED_UNREACHED.keys())
    ]
    problems += [
        f"SHIPPED_UNREACHED names {f}, which is not a shipped, unreached module"
        for f in sorted(SHIPPED_UNREACHED.keys() - (modules - reached))
    ]
    data = shipped - modules
    problems += [
        f"{f}: shipped, but it is not a module or {sorted(PACKAGE_DATA)}" for f in sorted(data - PACKAGE_DATA)
    ]
    problems += [f"{f}: the package leaves it out" for f in sorted(PACKAGE_DATA - data)]
    return problems


def _core_tools_regex(pattern: str) -> re.Pattern[str]:
    """How ``func azure functionapp publish`` reads one line (its parser is a port of the npm
    gitignore-parser): a leading ``/`` is dropped and the rest is matched from the start of the
    root-relative path, with no end anchor; ``**`` is one or more of any character, ``*`` one or
    more characters other than ``/``. So every pattern is rooted, and ``**/x`` needs a folder."""
    body = re.escape(pattern.removeprefix("/")).replace(r"\*\*", "(.+)").replace(r"\*", "([^/]+)")
    return re.compile(f"^({body})")


def funcignore_problems(root: Path) -> list[str]:
    """Each ``.funcignore`` line must mean the same to Core Tools as to azd's gitignore rules
    (pathspec here): rooted (``/x``) or at any depth spelled for both (``/x`` and ``**/x``)."""
    lines = [line.strip() for line in (root / ".funcignore").read_text().splitlines()]
    patterns = [line for line in lines if line and not line.startswith("#")]
    problems = [
        f".funcignore: {p!r} is not anchored: gitignore matches it in any folder, Core Tools at the root only"
        for p in patterns
        if not p.startswith(("/", "**/"))
    ]
    problems += [
        f".funcignore: {p!r} is a negation: it beats every line in Core Tools, only earlier ones in gitignore"
        for p in patterns
        if p.startswith("!")
    ]
    core_tools = [_core_tools_regex(p) for p in patterns if not p.startswith("!")]
    gitignore = pathspec.GitIgnoreSpec.from_lines(patterns)

    def denied(path: str) -> tuple[bool, bool]:
        return any(r.match(path) for r in core_tools), gitignore.match_file(path)

    for path in sorted({*_tree(root, denied), *FUNCIGNORE_PROBES}):
        by_core_tools, by_gitignore = denied(path)
        if by_core_tools != by_gitignore:
            left_out_by = "Core Tools" if by_core_tools else "azd (gitignore)"
            problems.append(f".funcignore: {path} is left out by {left_out_by} only")
    return problems


def _tree(root: Path, denied: Callable[[str], tuple[bool, bool]]) -> Iterator[str]:
    """Every file under ``root``, not descending into a folder both readings leave out whole
    (a rooted prefix match and a gitignore folder match both cover everything beneath)."""
    for directory, subdirs, files in os.walk(root):
        relative = Path(directory).relative_to(root)
        subdirs[:] = [d for d in subdirs if denied(f"{(relative / d).as_posix()}/") != (True, True)]
        yield from ((relative / f).as_posix() for f in files)


# --- the Agent's image -------------------------------------------------------------------------


def dockerfile_copies(root: Path, image: Image = AGENT_IMAGE) -> list[str]:
    """The sources of every COPY in the image's Dockerfile, as written (``domain/``)."""
    text = (root / image.dockerfile).read_text()
    return [src for line in re.findall(r"^COPY\s+(.+)$", text, re.M) for src in line.split()[:-1]]


def _docker_regex(pattern: str) -> re.Pattern[str]:
    """Docker's reading of a ``.dockerignore`` line: rooted, ``**`` any number of folders, ``*``
    and ``?`` within one name; a pattern also covers everything beneath what it matches."""
    body = ""
    for token in re.split(r"(\*\*/?|\*|\?)", pattern.strip("/")):
        if token.startswith("**"):
            body += "(.*/)?" if token.endswith("/") else ".*"
        elif token == "*":
            body += "[^/]*"
        elif token == "?":
            body += "[^/]"
        else:
            body += re.escape(token)
    return re.compile(f"{body}(/.*)?")


def ignore_file(root: Path, image: Image = AGENT_IMAGE) -> str:
    """The ignore file BuildKit reads for this Dockerfile: ``<Dockerfile>.dockerignore`` beside
    it if there is one, else the context root's ``.dockerignore``."""
    own = f"{image.dockerfile}.dockerignore"
    return own if (root / own).is_file() else ".dockerignore"


def docker_context(root: Path, image: Image = AGENT_IMAGE) -> set[str]:
    """The files the image's ignore file lets into the build context (the last matching line wins)."""
    rules: list[tuple[re.Pattern[str], bool, str]] = []
    for raw in (root / ignore_file(root, image)).read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            exception = line.startswith("!")
            pattern = line.removeprefix("!").strip()
            rules.append((_docker_regex(pattern), exception, re.split(r"[*?\[]", pattern, maxsplit=1)[0]))

    def excluded(path: str) -> bool:
        verdict = False
        for regex, exception, _ in rules:
            if regex.fullmatch(path):
                verdict = not exception
        return verdict

    def may_admit_beneath(folder: str) -> bool:
        return any(
            exc and (prefix.startswith(folder) or folder.startswith(prefix)) for _, exc, prefix in rules
        )

    admitted: set[str] = set()
    for directory, subdirs, files in os.walk(root):
        relative = Path(directory).relative_to(root)
        subdirs[:] = [
            d
            for d in subdirs
            if not excluded((relative / d).as_posix()) or may_admit_beneath(f"{(relative / d).as_posix()}/")
        ]
        admitted |= {p for p in ((relative / f).as_posix() for f in files) if not excluded(p)}
    return admitted


def image_files(root: Path, image: Image = AGENT_IMAGE) -> set[str]:
    """What the image holds of the repository: the context's files under a COPY source."""
    sources = [s.rstrip("/") for s in dockerfile_copies(root, image)]
    context = docker_context(root, image)
    return {f for f in context if any(f == s or f.startswith(f"{s}/") for s in sources)}


def image_problems(root: Path) -> list[str]:
    return [problem for image in IMAGES for problem in _image_problems(root, image)]


def _image_problems(root: Path, image: Image) -> list[str]:
    who, dockerfile, ignore = image.label, image.dockerfile, ignore_file(root, image)
    context = docker_context(root, image)
    shipped = image_files(root, image)
    modules = {f for f in shipped if f.endswith(".py")}
    reached = closure_files(root, image.entry)
    problems = [f"{f}: {who} imports it, but its image leaves it out" for f in sorted(reached - modules)]
    problems += [f"{f}: in {who}'s image, but {who} never imports it" for f in sorted(modules - reached)]
    problems += [
        f"{f}: in {who}'s image, but not a module or its requirements"
        for f in sorted(shipped - modules - image.data)
    ]
    problems += [f"{ignore} admits {f}, which {dockerfile} never copies" for f in sorted(context - shipped)]
    packages = {f.split("/")[0] for f in reached}
    copied = {s.rstrip("/") for s in dockerfile_copies(root, image)}
    problems += [
        f"{dockerfile}: copies {c}, not a package {who} reaches"
        for c in sorted(copied - packages - image.data)
    ]
    problems += [f"{dockerfile}: never copies {p}/, which {who} imports" for p in sorted(packages - copied)]
    return problems


# --- third-party imports and the requirements that pin them ------------------------------------


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(root: Path, relative: str) -> dict[str, str]:
    """``name==version`` lines of a requirements file and the files it includes with ``-r``."""
    found: dict[str, str] = {}
    path = root / relative
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r"):
            # pip reads an included file relative to the one that includes it
            included = os.path.normpath(Path(relative).parent / line.removeprefix("-r").strip())
            found |= pins(root, Path(included).as_posix())
        elif line.startswith("-c"):
            continue  # a constraint installs nothing by itself
        elif line and not line.startswith("--hash"):
            # A lock's entry continues over lines (``name==version \``, then ``--hash=...``).
            name, _, version = line.removesuffix("\\").strip().partition("==")
            found[canonical(name)] = version.strip()
    return found


@cache
def _top_level_owners() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


@cache
def _files_of(distribution: str) -> frozenset[str]:
    """Modules a distribution defines itself (``azure/core/__init__.py`` gives ``azure.core``)."""
    modules: set[str] = set()
    for file in importlib.metadata.distribution(distribution).files or ():
        parts = file.parts
        if parts[0] == ".." or "__pycache__" in parts or not file.name.endswith((".py", ".so", ".pyd")):
            continue
        stem = file.name.split(".")[0]
        modules.add(".".join(parts[:-1] if stem == "__init__" else [*parts[:-1], stem]))
    return frozenset(modules)


def distributions_of(name: str) -> set[str]:
    """The distributions that provide the module a dotted import name reaches. A top-level name
    most distributions own alone; a namespace package (``azure``, ``opentelemetry``) is split
    among many, so the longest prefix one of them defines decides."""
    candidates = _top_level_owners().get(name.split(".", maxsplit=1)[0], [])
    if len(set(candidates)) <= 1:
        return {canonical(c) for c in candidates}
    parts = name.split(".")
    for end in range(len(parts), 1, -1):
        prefix = ".".join(parts[:end])
        owners = {canonical(c) for c in candidates if prefix in _files_of(c)}
        if owners:
            return owners
    return {canonical(c) for c in candidates}


def third_party_imports(root: Path, files: Iterable[str]) -> dict[str, set[str]]:
    """Each non-stdlib, non-first-party dotted name the files import, with the files importing it."""
    found: dict[str, set[str]] = {}
    for relative in files:
        for name in imported_names(root, relative):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or first_party(root, name) is not None:
                continue
            found.setdefault(name, set()).add(relative)
    return found


def direct_distributions(root: Path, files: Iterable[str]) -> tuple[dict[str, set[str]], list[str]]:
    """Distributions the files import directly, with the importing files; and unresolved names."""
    by_distribution: dict[str, set[str]] = {}
    unresolved: list[str] = []
    for name, importers in sorted(third_party_imports(root, files).items()):
        owners = distributions_of(name)
        if not owners:
            unresolved.append(
                f"{', '.join(sorted(importers))}: imports {name}, which no installed distribution provides"
            )
        for owner in owners:
            by_distribution.setdefault(owner, set()).update(importers)
    return by_distribution, unresolved


def _pinning_problems(
    root: Path, files: set[str], requirements: str, unimported: dict[str, str], what: str
) -> list[str]:
    imported, problems = direct_distributions(root, files)
    pinned = pins(root, requirements)
    problems += [
        f"{', '.join(sorted(imported[d]))}: imports {d}, which {requirements} does not pin"
        for d in sorted(imported.keys() - pinned.keys())
    ]
    problems += [
        f"{requirements}: pins {d}, which {what} never imports (drop it, or say why)"
        for d in sorted(pinned.keys() - imported.keys() - unimported.keys())
    ]
    problems += [
        f"{requirements}: the reason given for {d} is stale: it is not pinned"
        for d in sorted(unimported.keys() - pinned.keys())
    ]
    return problems


def requirement_problems(root: Path) -> list[str]:
    app = {f for f in package_files(root) if f.endswith(".py")}
    problems = _pinning_problems(root, app, APP_INPUT, PINNED_UNIMPORTED, "the Function App package")
    for image in IMAGES:
        modules = {f for f in image_files(root, image) if f.endswith(".py")}
        what = f"{image.label} image"
        problems += _pinning_problems(root, modules, image.input, image.pinned_unimported, what)
    versions: dict[str, dict[str, str]] = {}
    for relative in (APP_INPUT, *(i.input for i in IMAGES), DEV_REQUIREMENTS):
        for name, version in pins(root, relative).items():
            versions.setdefault(name, {})[relative] = version
    problems += [
        f"{name} is pinned at different versions: {by_file}"
        for name, by_file in sorted(versions.items())
        if len(set(by_file.values())) > 1
    ]
    dev = pins(root, DEV_REQUIREMENTS)
    problems += [
        f"{DEV_REQUIREMENTS}: does not install {name}, which {relative} pins"
        for relative in (APP_INPUT, *(i.input for i in IMAGES))
        for name in sorted(pins(root, relative).keys() - dev.keys())
    ]
    return problems


@cache
def _requirements_of(distribution: str) -> tuple[Requirement, ...]:
    return tuple(Requirement(text) for text in importlib.metadata.requires(distribution) or [])


def installed_by(names: Iterable[str]) -> set[str]:
    """The distributions ``pip install`` of ``names`` brings: them and their dependencies, with
    the environment markers and extras evaluated as pip would here."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(canonical(n), frozenset[str]()) for n in names]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for requirement in _requirements_of(name):
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in extras | {""}):
                todo.append((canonical(requirement.name), frozenset(requirement.extras)))
    return {name for name, _ in seen}


def dev_only_problems(root: Path) -> list[str]:
    """No shipped module imports what only the development venv installs: a dev-only package
    is there in every test run and missing in Azure."""
    dev = installed_by(pins(root, DEV_REQUIREMENTS))
    problems: list[str] = []
    artefacts = [("the package", {f for f in package_files(root) if f.endswith(".py")}, APP_REQUIREMENTS)]
    artefacts += [
        (f"{i.label} image", {f for f in image_files(root, i) if f.endswith(".py")}, i.requirements)
        for i in IMAGES
    ]
    for what, files, requirements in artefacts:
        dev_only = dev - installed_by(pins(root, requirements))
        imported, _ = direct_distributions(root, files)
        problems += [
            f"{', '.join(sorted(imported[d]))}: imports {d}, which only {DEV_REQUIREMENTS} installs ({what})"
            for d in sorted(imported.keys() & dev_only)
        ]
    return problems


def problems(root: Path) -> list[str]:
    return [
        *funcignore_problems(root),
        *package_problems(root),
        *image_problems(root),
        *requirement_problems(root),
        *dev_only_problems(root),
    ]


if __name__ == "__main__":
    found = problems(Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd())
    print("\n".join(found) if found else "what ships is exactly what runs")
    sys.exit(1 if found else 0)
