"""Bicep files as pycep-parser 0.7.1 reads them, and a small evaluator over its JSON.

pycep turns a file into JSON: ``parameters``, ``variables``, ``resources``, ``modules``, ``outputs``,
each with ``__start_line__``. Values are JSON scalars, lists, objects, or ``{"operator": ...}`` /
``{"function": ...}`` nodes. It writes an identifier and a string literal the same way (``location``
and ``'location'`` both become ``"location"``), so a bare string that names a symbol in scope is read
as that symbol, and anything else as a literal.

The evaluator computes what can be known offline: literals, parameters (from the caller, from
``main.parameters.json``, or their defaults), variables, loops over known arrays, property and index
access, module outputs, a few pure functions (``join``, ``concat``, ``union``, ``toLower``, ...), and
resource ``name``s. Anything else (``uniqueString``, ``resourceGroup().id``, a resource's runtime
properties) is an ``Unknown``, which the rules treat as "cannot be checked" rather than as a value.

Each module call is evaluated as its own ``Instance`` with the parameters the caller passes, so a
rule sees, for example, the role GUID that ``main.bicep`` hands to a role-assignment module.
"""

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pycep import BicepParser

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
INTERPOLATION = re.compile(r"\$\{([^{}]*)\}")
PATH_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\['([^']*)'\]")
LINE_KEYS = ("__start_line__", "__end_line__")


class Unknown:
    """A value the checker cannot compute without deploying."""

    def __init__(
        self, why: str, partial: str = "", origin: tuple[tuple[str, ...], str] | None = None
    ) -> None:
        self.why = why
        self.partial = partial  # an interpolated string with "<?>" for the unknown parts
        # For a deployed resource's runtime value (its id, properties.principalId, ...): which
        # resource, as (the module calls from main.bicep to its file, its symbol). Two values with
        # the same origin belong to the same resource: a managed identity's principalId in a role
        # assignment and its id in a site's identity.userAssignedIdentities, for example.
        self.origin = origin

    def __repr__(self) -> str:
        return f"Unknown({self.why})"


def shown(value: object) -> str:
    """A setting's value as a problem names it: not set, unknown offline (and why), or its repr."""
    if value is None:
        return "not set"
    if isinstance(value, Unknown):
        return f"unknown offline ({value.why})"
    return repr(value)


def _replace(original: Any, old: Any, new: Any) -> Any:
    """``replace()``, keeping what is known: a deployment-time ID put into a known template (the
    workbook's content) leaves the rest of the text checkable, as ``Unknown.partial``."""
    if isinstance(original, str) and isinstance(old, str) and isinstance(new, str):
        return original.replace(old, new)
    text = original.partial if isinstance(original, Unknown) else original
    if isinstance(text, str) and text and isinstance(old, str):
        filled = text.replace(old, new.partial or "<?>" if isinstance(new, Unknown) else str(new))
        return Unknown("replace() with a value known only after deployment", partial=filled)
    return Unknown("replace() of an unknown value")


class ParseError(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass
class BicepFile:
    path: Path
    rel: str  # relative to the repository root, for messages
    text: str
    doc: dict[str, Any]

    def section(self, name: str) -> dict[str, Any]:
        value = self.doc.get(name) or {}
        assert isinstance(value, dict)
        return value

    def is_nullable_param(self, name: str) -> bool:
        """pycep drops the ``?`` of ``param x string?``; read it from the text."""
        return re.search(rf"^\s*param\s+{re.escape(name)}\s+[^\s=]+\?", self.text, re.MULTILINE) is not None

    def line_of(self, needle: str, start: int = 1, end: int | None = None) -> int | None:
        lines = self.text.splitlines()
        stop = len(lines) if end is None else min(end, len(lines))
        for number in range(max(start, 1), stop + 1):
            if needle in lines[number - 1]:
                return number
        return None


_PARSER: BicepParser | None = None


def parse_file(path: Path, root: Path) -> BicepFile:
    global _PARSER  # noqa: PLW0603 - building the LALR parser once saves a second per file
    if _PARSER is None:
        _PARSER = BicepParser(add_line_numbers=True)
    text = path.read_text(encoding="utf-8")
    try:
        doc = _PARSER.parse(text=text)
    except ValueError as error:  # pycep's own validator, without a position
        raise ParseError(None, str(error)) from None
    except Exception as error:  # noqa: BLE001 - lark raises many kinds; each is "does not parse"
        line = getattr(error, "line", None)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ParseError(line if isinstance(line, int) else None, first) from None
    return BicepFile(path=path, rel=path.relative_to(root).as_posix(), text=text, doc=doc or {})


def unwrap(config: Any) -> tuple[dict[str, Any] | None, Any]:
    """A resource's or module's body without its ``if (...)`` / ``[for ...]`` wrappers:
    (the loop node or None, the body)."""
    loop = None
    body = config
    while isinstance(body, dict) and "config" in body and ("condition" in body or "loop_type" in body):
        if "loop_type" in body:
            loop = body
        body = body["config"]
    return loop, body


def conditions(config: Any) -> list[Any]:
    """The ``if (...)`` expressions around a resource's or module's body (pycep nodes)."""
    found: list[Any] = []
    body = config
    while isinstance(body, dict) and "config" in body and ("condition" in body or "loop_type" in body):
        if body.get("condition") is not None:
            found.append(body["condition"])
        body = body["config"]
    return found


def all_of(*values: Any) -> Any:
    """Whether a resource is deployed: False if any condition is False, True if all are True,
    else Unknown (a condition that needs deployment-time values)."""
    if any(value is False for value in values):
        return False
    if all(value is True for value in values):
        return True
    return Unknown("a condition known only at deployment")


@dataclass
class ResourceRef:
    instance: "Instance"
    symbol: str


@dataclass
class ModuleRef:
    instance: "Instance"
    symbol: str


@dataclass
class Resource:
    """One evaluated resource body (one per loop item when the loop's array is known)."""

    file: BicepFile
    symbol: str
    type: str
    line: int
    end_line: int
    body: Any
    raw: Any  # the body as pycep wrote it, before evaluation
    existing: bool
    # Whether it is deployed: its own ``if (...)`` and its module calls' (True, False or Unknown).
    deployed: Any = True

    def get(self, *path: str) -> Any:
        value: Any = self.body
        for key in path:
            if isinstance(value, Unknown):
                return value
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return value

    @property
    def name(self) -> Any:
        return self.get("name")


@dataclass
class Instance:
    """One deployment of a Bicep file: main.bicep, or a module call with its parameters."""

    file: BicepFile
    params: dict[str, Any]
    loader: "Loader"
    caller_line: int | None = None
    deployed: Any = True  # the ``if (...)`` of the module calls that lead here (see all_of)
    path: tuple[str, ...] = ()  # the module calls from main.bicep here ('rbac', 'submitters[0]')
    _variables: dict[str, Any] = field(default_factory=dict)
    _busy: set[str] = field(default_factory=set)
    _children: dict[str, list["Instance"]] = field(default_factory=dict)
    _resources: dict[str, list[Resource]] = field(default_factory=dict)

    # --- symbols ---------------------------------------------------------------------------

    def lookup(self, name: str, local: dict[str, Any]) -> tuple[bool, Any]:
        if name in local:
            return True, local[name]
        if name in self.params:
            return True, self.params[name]
        variables = self.file.section("variables")
        if name in variables:
            return True, self.variable(name)
        if name in self.file.section("resources"):
            return True, ResourceRef(self, name)
        if name in self.file.section("modules"):
            return True, ModuleRef(self, name)
        return False, None

    def variable(self, name: str) -> Any:
        if name not in self._variables:
            if name in self._busy:
                return Unknown(f"variable {name} refers to itself")
            self._busy.add(name)
            self._variables[name] = self.eval(self.file.section("variables")[name]["value"], {})
            self._busy.discard(name)
        return self._variables[name]

    # --- evaluation ------------------------------------------------------------------------

    def eval(self, node: Any, local: dict[str, Any]) -> Any:  # noqa: PLR0911 - one case per node kind
        if node is None or isinstance(node, bool | int | float):
            return node
        if isinstance(node, str):
            return self._eval_string(node, local)
        if isinstance(node, list):
            return [self.eval(item, local) for item in node]
        if isinstance(node, dict):
            if "operator" in node and len(node) == 1:
                return self._eval_operator(node["operator"], local)
            if "function" in node and len(node) == 1:
                return self._eval_function(node["function"], local)
            if "loop_type" in node:
                return [self.eval(node["config"], item) for item in self.loop_items(node, local)]
            return {_key(k): self.eval(v, local) for k, v in node.items() if k not in LINE_KEYS}
        return Unknown(f"unexpected node {type(node).__name__}")

    def _eval_string(self, text: str, local: dict[str, Any]) -> Any:
        if IDENT.fullmatch(text):
            found, value = self.lookup(text, local)
            return value if found else text
        if "${" not in text:
            return text
        parts: list[str] = []
        missing: list[str] = []
        position = 0
        for match in INTERPOLATION.finditer(text):
            parts.append(text[position : match.start()])
            value = self.eval_path(match.group(1).strip(), local)
            if isinstance(value, bool):
                value = str(value).lower()
            if isinstance(value, str | int):
                parts.append(str(value))
            else:
                missing.append(match.group(1))
                parts.append("<?>")
            position = match.end()
        parts.append(text[position:])
        if missing:
            return Unknown(f"'{text}' needs {', '.join(missing)}", partial="".join(parts))
        return "".join(parts)

    def eval_path(self, expression: str, local: dict[str, Any]) -> Any:
        """``a.b[0]['c']`` inside an interpolation; other expressions are Unknown."""
        head = IDENT.match(expression)
        if head is None:
            return Unknown(f"expression {expression}")
        found, value = self.lookup(head.group(0), local)
        if not found:
            return Unknown(f"unknown symbol {head.group(0)}")
        rest = expression[head.end() :]
        position = 0
        for match in PATH_SEGMENT.finditer(rest):
            if match.start() != position:
                return Unknown(f"expression {expression}")
            position = match.end()
            name, index, quoted = match.groups()
            key: str | int = name if name else int(index) if index is not None else quoted
            value = self.member(value, key)
        if position != len(rest):
            return Unknown(f"expression {expression}")
        return value

    def member(self, value: Any, key: str | int) -> Any:  # noqa: PLR0911 - one case per kind of value
        if isinstance(value, Unknown):
            return value
        if isinstance(value, ResourceRef):
            # What the file declares (name, properties.maxDeliveryCount, ...) is known; the rest
            # (id, runtime properties) only after deployment.
            found = value.instance.resources(value.symbol)
            if isinstance(key, int):  # one item of a resource loop
                return found[key].body if 0 <= key < len(found) else Unknown(f"{value.symbol}[{key}]")
            if len(found) == 1 and isinstance(found[0].body, dict) and key in found[0].body:
                return found[0].body[key]
            return Unknown(
                f"{value.symbol}.{key} is known only after deployment",
                origin=(value.instance.path, value.symbol),
            )
        if isinstance(value, ModuleRef):
            return _ModuleOutputs(value) if key == "outputs" else Unknown(f"{value.symbol}.{key}")
        if isinstance(value, _ModuleOutputs):
            return value.ref.instance.module_output(value.ref.symbol, str(key))
        if isinstance(value, dict) and isinstance(key, str):
            return value.get(key, Unknown(f"no property {key}"))
        if isinstance(value, list) and isinstance(key, int):
            return value[key] if 0 <= key < len(value) else Unknown(f"index {key} out of range")
        return Unknown(f"cannot read {key!r} of {type(value).__name__}")

    def _eval_operator(self, operator: dict[str, Any], local: dict[str, Any]) -> Any:  # noqa: PLR0911, PLR0912
        kind = operator.get("type")
        operands = operator.get("operands") or {}
        if kind == "property_accessor":
            value = self.eval(operands["operand_1"], local)
            for key in _path(operands["operand_2"]):
                value = self.member(value, key)
            return value
        if kind == "index_accessor":
            base = self.eval(operands["operand_1"], local)
            index = self.eval(operands["operand_2"], local)
            return self.member(base, index) if isinstance(index, str | int) else Unknown("index")
        if kind == "conditional":
            condition = self.eval(operands["condition"], local)
            if isinstance(condition, bool):
                return self.eval(operands["true_value" if condition else "false_value"], local)
            return Unknown("condition known only at deployment")
        values = [self.eval(v, local) for v in operands.values()]
        if any(isinstance(v, Unknown | ResourceRef | ModuleRef) for v in values):
            return Unknown(f"operator {kind}")
        if kind == "not" and len(values) == 1:
            return not values[0]
        if kind == "and":
            return all(values)
        if kind == "or":
            return any(values)
        if kind == "equals" and len(values) == 2:
            return values[0] == values[1]
        if kind == "not_equals" and len(values) == 2:
            return values[0] != values[1]
        numbers = len(values) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        if kind == "add" and numbers:
            return values[0] + values[1]
        if kind == "substract" and numbers:  # pycep's spelling
            return values[0] - values[1]
        return Unknown(f"operator {kind}")

    def _eval_function(self, function: dict[str, Any], local: dict[str, Any]) -> Any:  # noqa: PLR0911, PLR0912
        kind = function.get("type")
        raw = function.get("parameters") or {}
        if kind == "load_json_content":
            path = self.file.path.parent / str(raw.get("file_path"))
            if raw.get("json_path") is None and path.is_file():
                return json.loads(path.read_text(encoding="utf-8"))
            return Unknown("loadJsonContent")
        if kind == "load_text_content":
            path = self.file.path.parent / str(raw.get("file_path"))
            if raw.get("encoding") is None and path.is_file():
                return path.read_text(encoding="utf-8")
            return Unknown("loadTextContent")
        args = [self.eval(v, local) for v in raw.values() if v is not None]
        if kind == "replace" and len(args) == 3:
            return _replace(*args)
        if any(isinstance(v, Unknown) for v in args):
            return Unknown(f"{kind}() of an unknown value")
        if kind == "join" and len(args) == 2 and isinstance(args[0], list):
            items = args[0]
            if all(isinstance(item, str) for item in items):
                return str(args[1]).join(items)
        if kind == "concat":
            if all(isinstance(a, list) for a in args):
                return [item for a in args for item in a]
            if all(isinstance(a, str | int) for a in args):
                return "".join(str(a) for a in args)
        if kind == "union" and all(isinstance(a, dict) for a in args):
            merged: dict[str, Any] = {}
            for a in args:
                merged.update(a)
            return merged
        if kind == "union" and all(isinstance(a, list) for a in args):
            return [item for a in args for item in a]
        if kind in ("to_lower", "to_upper") and len(args) == 1 and isinstance(args[0], str):
            return args[0].lower() if kind == "to_lower" else args[0].upper()
        if kind == "string" and len(args) == 1 and isinstance(args[0], str | int | bool):
            return str(args[0]).lower() if isinstance(args[0], bool) else str(args[0])
        if kind == "items" and len(args) == 1 and isinstance(args[0], dict):
            return [{"key": k, "value": v} for k, v in sorted(args[0].items())]
        if kind == "range" and len(args) == 2 and all(isinstance(a, int) for a in args):
            return list(range(args[0], args[0] + args[1]))
        if kind == "empty" and len(args) == 1 and isinstance(args[0], str | list | dict):
            return len(args[0]) == 0
        if kind == "length" and len(args) == 1 and isinstance(args[0], str | list | dict):
            return len(args[0])
        if kind == "take" and len(args) == 2 and isinstance(args[0], str | list) and isinstance(args[1], int):
            return args[0][: max(args[1], 0)]
        if kind in ("subscription_resource_id", "resource_id", "tenant_resource_id", "extension_resource_id"):
            # Enough for the rules: the role GUID is the last segment.
            return "/".join(str(a) for a in args if not isinstance(a, ResourceRef | ModuleRef))
        return Unknown(f"function {kind}")

    def loop_items(self, loop: dict[str, Any], local: dict[str, Any]) -> Iterator[dict[str, Any]]:
        detail = loop["loop_type"].get("detail") or {}
        array = self.eval(detail.get("array_name"), local)
        item, index = detail.get("item_name"), detail.get("index_name")
        if not isinstance(array, list):  # one pass with unknown items, so the body is still checked
            bound: dict[str, Any] = {str(item): Unknown("loop item")}
            if index:
                bound[str(index)] = Unknown("loop index")
            yield {**local, **bound}
            return
        for position, value in enumerate(array):
            bound = {str(item): value}
            if index:
                bound[str(index)] = position
            yield {**local, **bound}

    # --- resources and modules -------------------------------------------------------------

    def resources(self, symbol: str) -> list[Resource]:
        if symbol not in self._resources:
            self._resources[symbol] = []  # a resource that names itself sees no body
            decl = self.file.section("resources")[symbol]
            loop, body = unwrap(decl.get("config"))
            items = list(self.loop_items(loop, {})) if loop else [{}]
            self._resources[symbol] = [
                Resource(
                    file=self.file,
                    symbol=symbol,
                    type=str(decl.get("type")),
                    line=int(decl.get("__start_line__") or 0),
                    end_line=int(decl.get("__end_line__") or 0),
                    body=self.eval(body, local),
                    raw=body,
                    existing=bool(decl.get("existing")),
                    deployed=all_of(
                        self.deployed, *(self.eval(c, local) for c in conditions(decl.get("config")))
                    ),
                )
                for local in items
            ]
        return self._resources[symbol]

    def all_resources(self) -> Iterator[Resource]:
        for symbol in self.file.section("resources"):
            yield from self.resources(symbol)

    def children(self, symbol: str) -> list["Instance"]:
        if symbol not in self._children:
            self._children[symbol] = []
            decl = self.file.section("modules")[symbol]
            target = self.loader.module_file(self.file, decl)
            if target is not None:
                loop, body = unwrap(decl.get("config"))
                items = list(self.loop_items(loop, {})) if loop else [{}]
                for position, local in enumerate(items):
                    passed = (body or {}).get("params") or {}
                    params = {name: self.eval(value, local) for name, value in passed.items()}
                    deployed = all_of(
                        self.deployed, *(self.eval(c, local) for c in conditions(decl.get("config")))
                    )
                    instance = Instance(
                        target,
                        {},
                        self.loader,
                        caller_line=decl.get("__start_line__"),
                        deployed=deployed,
                        path=(*self.path, f"{symbol}[{position}]" if loop else symbol),
                    )
                    instance.params = instance.complete_params(params)
                    self._children[symbol].append(instance)
        return self._children[symbol]

    def module_output(self, symbol: str, name: str) -> Any:
        found = self.children(symbol)
        if len(found) != 1:
            return Unknown(f"outputs of looped module {symbol}")
        child = found[0]
        output = child.file.section("outputs").get(name)
        return child.eval(output["value"], {}) if output else Unknown(f"no output {name}")

    def complete_params(self, given: dict[str, Any]) -> dict[str, Any]:
        """The values passed, and each missing parameter's default (evaluated in this file)."""
        declared = self.file.section("parameters")
        missing = [name for name in declared if name not in given]
        params = {**given, **{name: Unknown(f"param {name} has no value") for name in missing}}
        self.params = params
        for name in missing:  # in declaration order: a default may use an earlier parameter
            default = declared[name].get("default")
            if default is not None:
                params[name] = self.eval(default, {})
        return params

    def walk(self) -> Iterator["Instance"]:
        """This instance and every module instance under it."""
        yield self
        for symbol in self.file.section("modules"):
            for child in self.children(symbol):
                yield from child.walk()


class _ModuleOutputs:
    def __init__(self, ref: ModuleRef) -> None:
        self.ref = ref


def _key(key: str) -> str:
    return key[1:-1] if len(key) >= 2 and key[0] == key[-1] == "'" else key


def _path(node: Any) -> list[str | int]:
    """pycep nests ``a.b.c`` as accessor(a, accessor(b, c)); the part after the first dot."""
    if isinstance(node, dict) and "operator" in node:
        operator = node["operator"]
        if operator.get("type") == "property_accessor":
            operands = operator["operands"]
            return [*_path(operands["operand_1"]), *_path(operands["operand_2"])]
    if isinstance(node, str | int):
        return [node]
    return [str(node)]


class Loader:
    """Parses each .bicep file once, and finds module targets."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[Path, BicepFile] = {}
        self.errors: dict[Path, ParseError] = {}

    def load(self, path: Path) -> BicepFile | None:
        path = path.resolve()
        if path not in self.files and path not in self.errors:
            try:
                self.files[path] = parse_file(path, self.root.resolve())
            except ParseError as error:
                self.errors[path] = error
        return self.files.get(path)

    def module_path(self, owner: BicepFile, decl: dict[str, Any]) -> Path | None:
        if decl.get("type") != "local":
            return None
        detail = decl.get("detail") or {}
        return (owner.path.parent / str(detail.get("path"))).resolve()

    def module_file(self, owner: BicepFile, decl: dict[str, Any]) -> BicepFile | None:
        path = self.module_path(owner, decl)
        return self.load(path) if path is not None and path.is_file() else None
