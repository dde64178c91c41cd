"""The telemetry names the code emits, read from the code with ``ast``, and the names the operator's
workbook (infra/workbooks/operator.workbook.json) queries, so a test can hold one to the other.

Emitted: the instruments ``services/telemetry.py`` creates (``_meter.create_counter("sas.x")``,
bound to a module name), the attribute keys each is recorded with (``telemetry.x.add(1, {...})``
anywhere in the code), and every ``order_span("name", ..., key=...)`` with its keyword attributes,
the ``sas.*`` IDs it adds, and what ``span.set_attribute("key", ...)`` adds inside it.
"""

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

CODE = ("services", "activities", "orchestrators", "agent_worker", "adapters", "domain", "function_app.py")
TELEMETRY = "services/telemetry.py"
# order_span's own attributes (services/telemetry.py ORDER_ID, INSTANCE_ID).
SPAN_IDS = ("ORDER_ID", "INSTANCE_ID")


@dataclass
class Emitted:
    metrics: dict[str, set[str]] = field(default_factory=dict)  # name -> keys on every point
    spans: dict[str, set[str]] = field(default_factory=dict)


def _files(root: Path) -> list[Path]:
    found: list[Path] = []
    for rel in CODE:
        path = root / rel
        found.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return found


def emitted(root: Path) -> Emitted:
    tree = ast.parse((root / TELEMETRY).read_text(encoding="utf-8"))
    instruments: dict[str, str] = {}  # module variable -> metric name
    constants: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                constants[target] = value.value
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr.startswith("create_")
                and value.args
                and isinstance(value.args[0], ast.Constant)
            ):
                instruments[target] = str(value.args[0].value)
    found = Emitted(metrics={name: set() for name in instruments.values()})
    span_ids = {constants[name] for name in SPAN_IDS}
    sites: dict[str, list[set[str]]] = {}
    for path in _files(root):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.With):
                _span(node, found, span_ids)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("add", "set", "record")
                and isinstance(node.func.value, ast.Attribute | ast.Name)
            ):
                holder = node.func.value
                variable = holder.attr if isinstance(holder, ast.Attribute) else holder.id
                if variable in instruments and (
                    path.as_posix().endswith(TELEMETRY)
                    or (
                        isinstance(holder, ast.Attribute)
                        and isinstance(holder.value, ast.Name)
                        and holder.value.id == "telemetry"
                    )
                ):
                    keys: set[str] = set()
                    for argument in node.args[1:]:
                        if isinstance(argument, ast.Dict):
                            keys.update(str(k.value) for k in argument.keys if isinstance(k, ast.Constant))
                    sites.setdefault(instruments[variable], []).append(keys)
    # A dimension a query splits by must be on every point: the keys every call site records.
    for name, recorded in sites.items():
        found.metrics[name] = set.intersection(*recorded)
    return found


def _span(node: ast.With, found: Emitted, span_ids: set[str]) -> None:
    for item in node.items:
        call = item.context_expr
        if not isinstance(call, ast.Call):
            continue
        function = call.func
        called = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        if called != "order_span" or not call.args or not isinstance(call.args[0], ast.Constant):
            continue
        keys = found.spans.setdefault(str(call.args[0].value), set())
        keys.update(span_ids)
        keys.update(k.arg for k in call.keywords if k.arg is not None)
        bound = item.optional_vars.id if isinstance(item.optional_vars, ast.Name) else None
        for inner in ast.walk(node):
            if (
                bound
                and isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Attribute)
                and inner.func.attr == "set_attribute"
                and isinstance(inner.func.value, ast.Name)
                and inner.func.value.id == bound
                and inner.args
                and isinstance(inner.args[0], ast.Constant)
            ):
                keys.add(str(inner.args[0].value))


@dataclass(frozen=True)
class Used:
    """What one workbook query names: its table, the metric or span names it filters on, and the
    ``customDimensions`` keys it reads."""

    item: str
    table: str
    names: frozenset[str]
    attributes: frozenset[str]


NAME_EQUALS = re.compile(r'\bname\s*==\s*"([^"]+)"')
NAME_IN = re.compile(r"\bname\s+in\s*\(([^)]*)\)")
DIMENSION = re.compile(r'customDimensions\s*(?:\[\s*"([^"]+)"\s*\]|\.([A-Za-z_][\w]*))')
TABLES = {"customMetrics": "metric", "dependencies": "span"}


def _queries(node: object, where: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        name = str(node.get("name", where))
        for key, value in node.items():
            if key == "query" and isinstance(value, str):
                found.append((name, value))
            else:
                found.extend(_queries(value, name))
    elif isinstance(node, list):
        for value in node:
            found.extend(_queries(value, where))
    return found


def used(workbook: dict[str, object]) -> list[Used]:
    """Each query split at its ``let`` statements, so that each part's names go with its table."""
    result: list[Used] = []
    for item, query in _queries(workbook, "workbook"):
        for part in query.split(";"):
            tables = [t for t in TABLES if re.search(rf"\b{t}\b", part)]
            if not tables:
                continue
            names = set(NAME_EQUALS.findall(part))
            for listed in NAME_IN.findall(part):
                names.update(re.findall(r'"([^"]+)"', listed))
            attributes = {a or b for a, b in DIMENSION.findall(part)}
            result.append(Used(item, tables[0], frozenset(names), frozenset(attributes)))
    return result


def problems(workbook: dict[str, object], code: Emitted) -> list[str]:
    """Every name a query uses that the code does not emit, as a sentence naming both."""
    found: list[str] = []
    for query in used(workbook):
        kind = TABLES[query.table]
        known = code.metrics if kind == "metric" else code.spans
        if not query.names:
            found.append(f"{query.item}: a {query.table} query that filters on no {kind} name")
        for name in sorted(query.names - set(known)):
            found.append(f"{query.item}: {kind} {name!r} is not emitted by the code")
        allowed = set().union(*(known.get(name, set()) for name in query.names))
        for attribute in sorted(query.attributes - allowed):
            found.append(f"{query.item}: attribute {attribute!r} is not recorded on {sorted(query.names)}")
    return found


def load_workbook(root: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(
        (root / "infra/workbooks/operator.workbook.json").read_text(encoding="utf-8")
    )
    return loaded
