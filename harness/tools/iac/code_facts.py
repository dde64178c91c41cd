"""What the code needs from its environment, read with ``ast`` (nothing is imported or run).

- ``function_app.py``: every ``%SETTING%`` in a decorator argument, every ``connection=`` prefix,
  and every literal ``queue_name=``.
- ``settings.py`` ``Settings`` and ``agent_worker/settings.py`` ``AgentSettings``: each
  field's alias and default (``Field(default, alias="NAME")``).
- ``adapters/cosmos/state_store.py``: the module constants ``CONTAINER`` and ``PARTITION_KEY_PATH``.
- the Python the project targets: the minimum of ``pyproject.toml`` ``[project] requires-python``,
  and the ``FROM python:X.Y`` images of ``agent_worker/Dockerfile``.
"""

import ast
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLACEHOLDER = re.compile(r"%([A-Za-z0-9_]+)%")

FUNCTION_APP = "function_app.py"
SETTINGS = ("settings.py", "Settings")
AGENT_SETTINGS = ("agent_worker/settings.py", "AgentSettings")
COSMOS_ADAPTER = "adapters/cosmos/state_store.py"
PYPROJECT = "pyproject.toml"
AGENT_DOCKERFILE = "agent_worker/Dockerfile"

# The lower bound of a requires-python specifier: ">=3.13", "~=3.13", "==3.13.*" (its major.minor).
LOWER_BOUND = re.compile(r"(?:>=|~=|===?)\s*(\d+)\.(\d+)")
PYTHON_IMAGE = re.compile(
    r"^\s*FROM\s+(?:--platform=\S+\s+)?(?:docker\.io/)?(?:library/)?python:(\d+)\.(\d+)", re.IGNORECASE
)


@dataclass(frozen=True)
class Where:
    file: str
    line: int


@dataclass(frozen=True)
class SettingField:
    alias: str
    default: Any  # None when the field has no literal default
    where: Where


@dataclass(frozen=True)
class Binding:
    function: str
    placeholders: tuple[str, ...]
    connection: str | None
    queue_name: str | None  # a literal queue name; a %SETTING% is in placeholders
    queue_setting: str | None  # the SETTING of queue_name="%SETTING%"
    where: Where
    decorator: str = ""  # the decorator's name: "service_bus_queue_trigger", "timer_trigger", ...


class CodeError(Exception):
    pass


def _parse(root: Path, rel: str) -> ast.Module:
    path = root / rel
    if not path.is_file():
        raise CodeError(f"{rel} is missing")
    return ast.parse(path.read_text(encoding="utf-8"), filename=rel)


def bindings(root: Path) -> list[Binding]:
    tree = _parse(root, FUNCTION_APP)
    found: list[Binding] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            if not isinstance(decorator, ast.Call):
                continue
            strings = {
                kw.arg: kw.value.value
                for kw in decorator.keywords
                if kw.arg and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)
            }
            placeholders = tuple(name for text in strings.values() for name in PLACEHOLDER.findall(text))
            connection = strings.get("connection")
            queue = strings.get("queue_name")
            queue_setting = None
            if queue is not None and (match := PLACEHOLDER.fullmatch(queue)):
                queue_setting, queue = match.group(1), None
            if placeholders or connection or queue:
                found.append(
                    Binding(
                        function=node.name,
                        placeholders=placeholders,
                        connection=connection,
                        queue_name=queue,
                        queue_setting=queue_setting,
                        where=Where(FUNCTION_APP, decorator.lineno),
                        decorator=_decorator_name(decorator.func),
                    )
                )
    return found


def _decorator_name(func: ast.expr) -> str:
    """``app.service_bus_queue_trigger`` -> ``service_bus_queue_trigger``."""
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def settings_fields(root: Path, rel: str, class_name: str) -> list[SettingField]:
    tree = _parse(root, rel)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return [field for stmt in node.body if (field := _field(stmt, rel)) is not None]
    raise CodeError(f"{rel} has no class {class_name}")


def _field(stmt: ast.stmt, rel: str) -> SettingField | None:
    if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.value, ast.Call):
        return None
    call = stmt.value
    if not (isinstance(call.func, ast.Name) and call.func.id == "Field"):
        return None
    alias = next(
        (kw.value.value for kw in call.keywords if kw.arg == "alias" and isinstance(kw.value, ast.Constant)),
        None,
    )
    if not isinstance(alias, str):
        return None
    default: Any = None
    if call.args:
        try:
            default = ast.literal_eval(call.args[0])
        except ValueError:
            default = None
    return SettingField(alias=alias, default=default, where=Where(rel, stmt.lineno))


def module_constant(root: Path, rel: str, name: str) -> tuple[str, Where]:
    tree = _parse(root, rel)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value, Where(rel, node.lineno)
    raise CodeError(f"{rel} has no string constant {name}")


def required_python(root: Path) -> tuple[str, str, Where]:
    """(major.minor, the specifier) of ``requires-python``: its minimum is the version the project
    targets, so the deployments must run that one."""
    path = root / PYPROJECT
    if not path.is_file():
        raise CodeError(f"{PYPROJECT} is missing")
    text = path.read_text(encoding="utf-8")
    try:
        project = tomllib.loads(text).get("project")
    except tomllib.TOMLDecodeError as error:
        raise CodeError(f"{PYPROJECT} does not parse: {error}") from None
    specifier = project.get("requires-python") if isinstance(project, dict) else None
    if not isinstance(specifier, str):
        raise CodeError(f"{PYPROJECT} has no [project] requires-python")
    bounds = LOWER_BOUND.findall(specifier)
    if not bounds:
        raise CodeError(f"{PYPROJECT} requires-python '{specifier}' states no minimum version")
    major, minor = max((int(a), int(b)) for a, b in bounds)
    line = next((n for n, row in enumerate(text.splitlines(), 1) if "requires-python" in row), 0)
    return f"{major}.{minor}", specifier, Where(PYPROJECT, line)


def python_images(root: Path, rel: str = AGENT_DOCKERFILE) -> list[tuple[str, Where]]:
    """The major.minor of every ``FROM python:X.Y...`` stage of a Dockerfile."""
    path = root / rel
    if not path.is_file():
        raise CodeError(f"{rel} is missing")
    return [
        (f"{match.group(1)}.{match.group(2)}", Where(rel, number))
        for number, row in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if (match := PYTHON_IMAGE.match(row))
    ]
