"""Cross-checks between the code and its deployments: settings, queues, Cosmos DB container.

What the code needs is read from the code (``code_facts``); the rule for which settings are
required is in the module docstring of ``policy`` and in harness/tools/iac/README.md.
"""

import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.tools.iac import code_facts, emulator, policy, submitters
from harness.tools.iac.bicep import Resource, Unknown
from harness.tools.iac.code_facts import Binding, SettingField, Where
from harness.tools.iac.infra_rules import Deployment, check_queue_properties, queue_name, strip_comments
from harness.tools.iac.problems import Report

SAMPLE = "local.settings.sample.json"
EMULATOR_CONFIG = "harness/emulators/servicebus-config/Config.json"
QUEUE_ALIAS = re.compile(r"_QUEUES?$")
PROFILES = {policy.AZURE: "azure", policy.LOCAL: "emulators"}
PROFILE_SETTING = "SAS_PROFILE"


@dataclass(frozen=True)
class Requirement:
    names: tuple[str, ...]  # setting any one of these is enough
    why: str


@dataclass
class Target:
    """A place that sets settings: a Function App or Container App in Bicep, or the sample file."""

    label: str
    kind: str  # policy.AZURE or policy.LOCAL
    file: str
    line: int | None
    values: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, int | None] = field(default_factory=dict)


@dataclass
class Code:
    bindings: list[Binding]
    app_fields: list[SettingField]
    agent_fields: list[SettingField]
    container: tuple[str, Where]
    partition_key: tuple[str, Where]


def read_code(root: Path, report: Report) -> Code | None:
    try:
        return Code(
            bindings=code_facts.bindings(root),
            app_fields=code_facts.settings_fields(root, *code_facts.SETTINGS),
            agent_fields=code_facts.settings_fields(root, *code_facts.AGENT_SETTINGS),
            container=code_facts.module_constant(root, code_facts.COSMOS_ADAPTER, "CONTAINER"),
            partition_key=code_facts.module_constant(root, code_facts.COSMOS_ADAPTER, "PARTITION_KEY_PATH"),
        )
    except (code_facts.CodeError, SyntaxError) as error:
        fix = "update harness/tools/iac/code_facts.py"
        if isinstance(error, SyntaxError):
            # ast parses only the syntax of the Python running the checker.
            running = "{}.{}".format(*sys.version_info[:2])
            fix = f"fix it, or rebuild .venv-bicep with the project's Python (this one is {running})"
        report.add("harness/tools/iac", None, f"cannot read the code: {error}", fix)
        return None


def check(root: Path, deployment: Deployment | None, report: Report) -> None:
    code = read_code(root, report)
    if code is None:
        return
    sample = sample_target(root, report)
    app_targets: list[Target] = []
    agent_targets: list[Target] = []
    if deployment is not None:
        app_targets = function_apps(deployment, report)
        agent_targets = _agent_apps(deployment, report)
    for target in [*app_targets, *([sample] if sample else [])]:
        _check_settings(target, _app_requirements(code, target.kind), report)
        _check_forbidden(target, code, report)
        _check_profile(target, report)
    for target in [*agent_targets, *([sample] if sample else [])]:
        _check_settings(target, _field_requirements(code.agent_fields, target.kind, "AgentSettings"), report)
    if sample is not None and deployment is not None:
        _check_sample_mirrors(sample, [*app_targets, *agent_targets], code, report)
    emulator = emulator_queues(root, report)
    bicep = bicep_queues(deployment, report) if deployment is not None else None
    targets = [*app_targets, *agent_targets, *([sample] if sample else [])]
    _check_queues(code, targets, bicep, emulator, report, local_only=_sample_queue_off(deployment))
    if deployment is not None:
        _check_cosmos(code, app_targets, deployment, report)
    _check_python(root, deployment, report)


# --- settings ----------------------------------------------------------------------------------


def _where(where: Where) -> str:
    return f"{where.file}:{where.line}"


def _connections(code: Code) -> dict[str, str]:
    found = {name: "the Functions host's storage" for name in policy.HOST_CONNECTIONS}
    for binding in code.bindings:
        if binding.connection:
            found.setdefault(binding.connection, f"{_where(binding.where)} ({binding.function})")
    return found


def _identity_names(prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}__{suffix}" for suffix in policy.IDENTITY_SUFFIXES)


def _app_requirements(code: Code, kind: str) -> list[Requirement]:
    requirements: list[Requirement] = []
    for binding in code.bindings:
        for name in binding.placeholders:
            requirements.append(
                Requirement((name,), f"%{name}% at {_where(binding.where)} ({binding.function})")
            )
    for prefix, why in _connections(code).items():
        identity = _identity_names(prefix)
        if kind == policy.AZURE:
            requirements.append(Requirement(identity, f"connection '{prefix}' of {why}, identity-based"))
            for part in ("credential", "clientId"):
                requirements.append(
                    Requirement((f"{prefix}__{part}",), f"the user-assigned identity of {prefix}")
                )
        else:
            requirements.append(Requirement((prefix, *identity), f"connection '{prefix}' of {why}"))
    return requirements + _field_requirements(code.app_fields, kind, "Settings")


def _field_requirements(fields: list[SettingField], kind: str, model: str) -> list[Requirement]:
    """Every alias is required but those optional for this target (policy.OPTIONAL_SETTINGS); the
    aliases ``X`` and ``X__...`` of one connection are alternatives (in Azure, only ``X__...``)."""
    groups: dict[str, list[SettingField]] = {}
    for setting in fields:
        optional = policy.OPTIONAL_SETTINGS.get(setting.alias)
        if optional is None or kind not in optional[0]:
            groups.setdefault(setting.alias.split("__")[0], []).append(setting)
    requirements: list[Requirement] = []
    for members in groups.values():
        names = [m.alias for m in members]
        if kind == policy.AZURE and any("__" in n for n in names):
            names = [n for n in names if "__" in n]
        first = members[0].where
        requirements.append(Requirement(tuple(names), f"{model} field at {_where(first)}"))
    return requirements


def _check_settings(target: Target, requirements: list[Requirement], report: Report) -> None:
    for requirement in requirements:
        if any(name in target.values for name in requirement.names):
            continue
        names = " or ".join(requirement.names[:2]) + (" or ..." if len(requirement.names) > 2 else "")
        report.add(
            target.file,
            target.line,
            f"{target.label} does not set {names} (needed by {requirement.why})",
            f"add {requirement.names[0]} to {target.label}'s settings",
        )


def _key_based_names(code: Code) -> set[str]:
    """Settings that hold a connection string: a connection prefix itself, where an identity-based
    ``X__...`` form exists."""
    names = set(_connections(code))
    aliases = [f.alias for f in code.app_fields]
    names.update(a for a in aliases if any(other.startswith(f"{a}__") for other in aliases))
    return names


def _check_forbidden(target: Target, code: Code, report: Report) -> None:
    if target.kind != policy.AZURE:
        return
    for name in sorted(_key_based_names(code) & set(target.values)):
        report.add(
            target.file,
            target.lines.get(name) or target.line,
            f"{target.label} sets {name}: a connection string, which needs a key",
            f"set {name}__<endpoint> with __credential and __clientId (identity-based) instead",
        )
    for name, value in target.values.items():
        if name.endswith("__credential") and isinstance(value, str) and value != "managedidentity":
            report.add(
                target.file,
                target.lines.get(name) or target.line,
                f"{target.label} sets {name} to '{value}'",
                "set it to 'managedidentity'",
            )


def _check_profile(target: Target, report: Report) -> None:
    value = target.values.get(PROFILE_SETTING)
    expected = PROFILES[target.kind]
    if isinstance(value, str) and value != expected:
        report.add(
            target.file,
            target.lines.get(PROFILE_SETTING) or target.line,
            f"{target.label} sets {PROFILE_SETTING}={value}",
            f"set {PROFILE_SETTING}={expected} there",
        )


# --- the sample mirrors the deployment -----------------------------------------------------------


def _check_sample_mirrors(sample: Target, deployed: list[Target], code: Code, report: Report) -> None:
    """``local.settings.sample.json`` holds what the deployment sets (docs/deploying.md): each value
    the Bicep sets, else the code's default; every setting the Bicep sets; nothing that neither the
    code nor the Bicep knows. The exceptions are policy.SAMPLE_LOCAL_VALUES, AZURE_ONLY_SETTINGS
    and SAMPLE_ONLY_SETTINGS, each with its reason; a listed value that no longer differs is stale."""
    defaults = {f.alias: f.default for f in [*code.app_fields, *code.agent_fields]}
    placeholders = {name for binding in code.bindings for name in binding.placeholders}
    in_code = set(defaults) | placeholders | set(_connections(code))
    setters: dict[str, list[Target]] = {}
    for target in deployed:
        for name in target.values:
            setters.setdefault(name, []).append(target)
    for name, value in sample.values.items():
        where = sample.lines.get(name) or sample.line
        if name not in in_code and name not in setters:
            if name not in policy.SAMPLE_ONLY_SETTINGS:
                report.add(
                    sample.file,
                    where,
                    f"{sample.label} sets {name}, which neither the code (Settings, AgentSettings, "
                    "function_app.py) nor the Bicep knows",
                    "remove it, or list it in harness/tools/iac/policy.py SAMPLE_ONLY_SETTINGS with why",
                )
            continue
        _check_sample_value(
            sample, name, value, targets=setters.get(name, []), defaults=defaults, report=report
        )
    for name, targets in sorted(setters.items()):
        if name in sample.values or name in in_code:  # a missing alias is the requirements' to report
            continue
        connection = name.split("__")[0]
        if "__" in name and connection in sample.values and connection in policy.SAMPLE_LOCAL_VALUES:
            continue  # a part of a connection the sample sets as the local emulator's string
        if name in policy.AZURE_ONLY_SETTINGS:
            continue
        target = targets[0]
        report.add(
            sample.file,
            sample.line,
            f"{sample.label} does not set {name}, which {target.label} sets "
            f"({target.file}:{target.lines.get(name) or target.line})",
            f"add {name} with the deployment's value, or list it in harness/tools/iac/policy.py "
            "AZURE_ONLY_SETTINGS with the reason",
        )
    for name in sorted(set(policy.SAMPLE_LOCAL_VALUES) - set(sample.values)):
        report.add(
            "harness/tools/iac/policy.py",
            None,
            f"SAMPLE_LOCAL_VALUES lists {name}, which {sample.label} does not set",
            "drop it from the list",
        )


def _check_sample_value(
    sample: Target, name: str, value: Any, *, targets: list[Target], defaults: dict[str, Any], report: Report
) -> None:
    """The sample's value of one setting against the deployment's (where it is known offline),
    else the code's default."""
    where = sample.lines.get(name) or sample.line
    known = [(t, t.values[name]) for t in targets if not isinstance(t.values[name], Unknown)]
    if known:
        target, deployed = next(((t, v) for t, v in known if not _same_text(value, v)), known[0])
        differs, wanted = not _same_text(value, deployed), _text(deployed)
        source = f"{target.label} sets {json.dumps(wanted)}"
    elif name in defaults and defaults[name] is not None:
        differs = not _same_default(value, defaults[name])
        source = f"its default in the code is {json.dumps(_text(defaults[name]))}"
        wanted = _text(defaults[name])
    else:
        differs, source, wanted = True, "the deployment's value is known only when deployed", ""
    listed = policy.SAMPLE_LOCAL_VALUES.get(name)
    if listed is not None:
        if not differs:
            report.add(
                "harness/tools/iac/policy.py",
                None,
                f"SAMPLE_LOCAL_VALUES lists {name} ({listed}), but {sample.label}'s value is the "
                f"deployment's ({source})",
                "drop it from the list, so that a change on either side is caught",
            )
        return
    if differs:
        fix = f"set it to {json.dumps(wanted)}" if wanted else "set it to what the deployment sets"
        report.add(
            sample.file,
            where,
            f"{sample.label} sets {name}={json.dumps(_text(value))}, but {source}",
            f"{fix}, or list {name} in harness/tools/iac/policy.py SAMPLE_LOCAL_VALUES with why it "
            "differs locally",
        )


def _text(value: Any) -> str:
    """A setting as the environment holds it: text, a bool as JSON writes it."""
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _same_text(value: Any, deployed: Any) -> bool:
    return _text(value) == _text(deployed)


def _same_default(value: Any, default: Any) -> bool:
    """The sample's text against a Field's literal default, as pydantic reads the text."""
    text = _text(value)
    if isinstance(default, bool):
        return text.lower() == _text(default)
    if isinstance(default, int | float):
        try:
            return float(text) == float(default)
        except ValueError:
            return False
    return text == _text(default)


def sample_target(root: Path, report: Report) -> Target | None:
    path = root / SAMPLE
    if not path.is_file():
        report.add(SAMPLE, None, "missing", "write the settings for Core Tools with docker-compose")
        return None
    text = path.read_text(encoding="utf-8")
    try:
        values = json.loads(text).get("Values")
    except (json.JSONDecodeError, AttributeError) as error:
        report.add(SAMPLE, None, f"not a local.settings file: {error}", "fix its JSON")
        return None
    if not isinstance(values, dict):
        report.add(SAMPLE, None, "has no Values object", 'put the settings under "Values"')
        return None
    target = Target(SAMPLE, policy.LOCAL, SAMPLE, _line_in(text, '"Values"'), values=values)
    target.lines = {name: _line_in(text, f'"{name}"') for name in values}
    return target


def _line_in(text: str, needle: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    return None


def _name_values(items: Any, resource: Resource, label: str, report: Report) -> dict[str, Any] | None:
    """``[{name: 'X', value: ...}]`` (app settings, container env) as a dict."""
    if items is None:
        return {}
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        why = items.why if isinstance(items, Unknown) else type(items).__name__
        report.add(
            resource.file.rel,
            resource.line,
            f"{label}: cannot read its settings offline ({why})",
            "write them as a list of { name: 'X', value: ... } built from literals, parameters, "
            "variables, union(), items() or for-expressions",
        )
        return None
    values: dict[str, Any] = {}
    for item in items:
        name = item.get("name")
        if isinstance(name, str):
            values[name] = item.get("value", item.get("secretRef"))
        else:
            report.add(
                resource.file.rel, resource.line, f"{label}: a setting name is {name}", "use a literal name"
            )
    return values


def _setting_lines(deployment: Deployment, names: Iterable[str], first: str) -> dict[str, int | None]:
    """Where each setting is written: the resource's own file, else (as a module parameter) nowhere
    precise, and the resource's line is used."""
    text = next((i.file.text for i in deployment.instances if i.file.rel == first), "")
    lines = strip_comments(text).splitlines()
    found: dict[str, int | None] = {}
    for name in names:
        pattern = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")
        found[name] = next((n for n, line in enumerate(lines, start=1) if pattern.search(line)), None)
    return found


def is_function_app(resource: Resource) -> bool:
    return (
        resource.type.lower() == "microsoft.web/sites"
        and not resource.existing
        and "functionapp" in str(resource.get("kind") or "").lower()
    )


def function_apps(deployment: Deployment, report: Report) -> list[Target]:
    targets: list[Target] = []
    for instance in deployment.instances:
        resources = list(instance.all_resources())
        sites = [r for r in resources if is_function_app(r)]
        configs = [
            r
            for r in resources
            if r.type.lower() == "microsoft.web/sites/config"
            and "appsettings" in json.dumps((r.raw or {}).get("name", "")).lower()
        ]
        for site in sites:
            label = f"the Function App '{site.symbol}'"
            values = _name_values(site.get("properties", "siteConfig", "appSettings"), site, label, report)
            if values is None:
                continue
            for config in configs:
                parent = (config.raw or {}).get("parent")
                if parent in (None, site.symbol) or len(sites) == 1:
                    properties = config.get("properties")
                    if isinstance(properties, dict):
                        values.update(properties)
            target = Target(label, policy.AZURE, site.file.rel, site.line, values=values)
            target.lines = _setting_lines(deployment, values, site.file.rel)
            targets.append(target)
    if not targets:
        report.add(
            "infra/",
            None,
            "no Function App (Microsoft.Web/sites with kind 'functionapp...')",
            "deploy function_app.py as a Flex Consumption Function App",
        )
    return targets


def _agent_apps(deployment: Deployment, report: Report) -> list[Target]:
    targets: list[Target] = []
    for app in deployment.resources("Microsoft.App/containerApps"):
        tags = app.get("tags")
        service = tags.get("azd-service-name") if isinstance(tags, dict) else None
        named = (
            policy.AGENT_SERVICE in f"{app.symbol} {app.name if isinstance(app.name, str) else ''}".lower()
        )
        if not (service == policy.AGENT_SERVICE or (not isinstance(service, str) and named)):
            continue
        label = f"the agent Container App '{app.symbol}'"
        containers = app.get("properties", "template", "containers")
        values: dict[str, Any] = {}
        for container in containers if isinstance(containers, list) else [containers]:
            env = container.get("env") if isinstance(container, dict) else container
            found = _name_values(env, app, label, report)
            values.update(found or {})
        target = Target(label, policy.AZURE, app.file.rel, app.line, values=values)
        target.lines = _setting_lines(deployment, values, app.file.rel)
        targets.append(target)
    if not targets:
        report.add(
            "infra/",
            None,
            f"no Container App for the agent (tag azd-service-name: '{policy.AGENT_SERVICE}')",
            "deploy agent_worker as a Container App tagged with its azd service name",
        )
    return targets


# --- queues ------------------------------------------------------------------------------------


@dataclass
class Queue:
    file: str
    line: int | None
    properties: dict[str, Any]


def bicep_queues(deployment: Deployment, report: Report) -> dict[str, Queue]:
    queues: dict[str, Queue] = {}
    for resource in deployment.resources("Microsoft.ServiceBus/namespaces/queues"):
        name = queue_name(resource)
        properties = resource.get("properties")
        if not isinstance(name, str):
            report.add(
                resource.file.rel,
                resource.line,
                f"queue '{resource.symbol}': cannot tell its name offline ({name})",
                "name queues with literals, parameters or variables",
            )
            continue
        queues[name] = Queue(
            resource.file.rel, resource.line, properties if isinstance(properties, dict) else {}
        )
    return queues


def emulator_queues(root: Path, report: Report) -> dict[str, Queue] | None:
    """The queues of ``harness/emulators/servicebus-config/Config.json``, after checking it against what the
    emulator
    accepts (``emulator.validate``: its published schema and limits; an invalid file stops the
    emulator at start-up)."""
    path = root / EMULATOR_CONFIG
    if not path.is_file():
        report.add(EMULATOR_CONFIG, None, "missing", "declare the Service Bus emulator's queues")
        return None
    text = path.read_text(encoding="utf-8")
    for finding in emulator.validate(text):
        report.add(
            EMULATOR_CONFIG,
            finding.line,
            f"{finding.what} (the emulator fails to start: {emulator.STARTUP_FAILURE_URL})",
            finding.fix,
        )
    try:
        namespaces = json.loads(text)["UserConfig"]["Namespaces"]
        queues = {
            str(q["Name"]): Queue(
                EMULATOR_CONFIG, _line_in(text, f'"{q["Name"]}"'), dict(q.get("Properties") or {})
            )
            for namespace in namespaces
            for q in namespace.get("Queues") or []
        }
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        report.add(
            EMULATOR_CONFIG, None, f"not an emulator config: {error!r}", "fix UserConfig.Namespaces[].Queues"
        )
        return None
    for name, queue in queues.items():
        check_queue_properties(queue.file, queue.line, f"queue {name}", queue.properties, report)
    return queues


@dataclass(frozen=True)
class Named:
    """A queue name, and who names it."""

    queue: str
    source: str
    file: str
    line: int | None


def _queue_settings(code: Code) -> set[str]:
    aliases = {f.alias for f in [*code.app_fields, *code.agent_fields] if QUEUE_ALIAS.search(f.alias)}
    return aliases | {b.queue_setting for b in code.bindings if b.queue_setting}


def _split(value: Any) -> list[str]:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    return []


def _named_queues(code: Code, targets: list[Target]) -> list[Named]:
    named: list[Named] = []
    for binding in code.bindings:
        if binding.queue_name:
            named.append(Named(binding.queue_name, binding.function, binding.where.file, binding.where.line))
    settings = _queue_settings(code)
    for setting in [*code.app_fields, *code.agent_fields]:
        if setting.alias in settings:
            for queue in _split(setting.default):
                named.append(
                    Named(queue, f"the default of {setting.alias}", setting.where.file, setting.where.line)
                )
    for target in targets:
        for name in sorted(settings & set(target.values)):
            for queue in _split(target.values[name]):
                named.append(Named(queue, f"{name} in {target.label}", target.file, target.lines.get(name)))
    # E16: each registered submitting app's status queue, status-<name> (harness/tools/iac/submitters.py).
    registry = policy.SUBMITTERS_SETTING
    for setting in (f for f in code.app_fields if f.alias == registry):
        for queue in submitters.status_queues(setting.default):
            named.append(Named(queue, f"the default of {registry}", setting.where.file, setting.where.line))
    for target in (t for t in targets if registry in t.values):
        for queue in submitters.status_queues(target.values[registry]):
            named.append(
                Named(queue, f"{registry} in {target.label}", target.file, target.lines.get(registry))
            )
    return named


def _sample_queue_off(deployment: Deployment | None) -> set[str]:
    """The sample app's status queue when this evaluation has main.bicep's sampleApp off: the
    emulator keeps it (the local profiles are a first deployment's), and first_deployment.py
    compares it with the option on."""
    params = deployment.instances[0].params if deployment is not None and deployment.instances else {}
    name = params.get(policy.SAMPLE_APP_NAME_PARAM)
    if params.get(policy.SAMPLE_APP_PARAM) is False and isinstance(name, str):
        return {f"{policy.STATUS_QUEUE_PREFIX}{name}"}
    return set()


def _check_queues(
    code: Code,
    targets: list[Target],
    bicep: dict[str, Queue] | None,
    emulator: dict[str, Queue] | None,
    report: Report,
    *,
    local_only: set[str],
) -> None:
    places = [(label, q) for label, q in (("the Bicep", bicep), (EMULATOR_CONFIG, emulator)) if q is not None]
    for named in _named_queues(code, targets):
        for label, queues in places:
            if named.queue not in queues:
                report.add(
                    named.file,
                    named.line,
                    f"queue '{named.queue}' ({named.source}) is not declared in {label}",
                    f"declare queue '{named.queue}' in {label}",
                )
    if bicep is not None and emulator is not None:
        _compare_queues(bicep, emulator, report, local_only)
    _check_max_deliveries(code, targets, [q for _, q in places], report)


def _compare_queues(
    bicep: dict[str, Queue], emulator_config: dict[str, Queue], report: Report, local_only: set[str]
) -> None:
    """The same queues in both (but ``local_only``, which the emulator may hold alone), with the
    same properties, but those in ``emulator.EMULATOR_CLAMPED``: there Config.json holds the
    Bicep's value if the emulator accepts it, else the emulator's bound."""
    for name in sorted(set(bicep) - set(emulator_config)):
        q = bicep[name]
        report.add(q.file, q.line, f"queue '{name}' is not in {EMULATOR_CONFIG}", "declare it there too")
    for name in sorted(set(emulator_config) - set(bicep) - local_only):
        q = emulator_config[name]
        report.add(
            q.file, q.line, f"queue '{name}' is not in the Bicep", "declare it in the Service Bus module"
        )
    for name in sorted(set(bicep) & set(emulator_config)):
        ours, theirs = bicep[name], emulator_config[name]
        stated = {k.lower() for k in theirs.properties}
        for bicep_key in ours.properties:
            documented = emulator.documented_name(bicep_key)
            if documented is not None and bicep_key.lower() not in stated:
                report.add(
                    theirs.file,
                    theirs.line,
                    f"queue '{name}' does not state {documented}; the Bicep states {bicep_key} "
                    f"({ours.file}:{ours.line}) and the emulator would use its own default",
                    f"state {documented} in {EMULATOR_CONFIG} too",
                )
        by_key = {k.lower(): (k, v) for k, v in ours.properties.items()}
        for key, value in theirs.properties.items():
            if key.lower() not in by_key:
                continue
            bicep_key, bicep_value = by_key[key.lower()]
            if isinstance(bicep_value, Unknown):
                continue
            _compare_property(
                name, ours, theirs, report, key=key, value=value, bicep_key=bicep_key, bicep_value=bicep_value
            )


def _compare_property(
    name: str,
    ours: Queue,
    theirs: Queue,
    report: Report,
    *,
    key: str,
    value: Any,
    bicep_key: str,
    bicep_value: Any,
) -> None:
    where = f"{ours.file}:{ours.line}"
    documented = emulator.documented_name(key)
    if documented in emulator.EMULATOR_CLAMPED:
        expected = emulator.emulator_value(documented, bicep_value)
        if expected is None:
            report.add(
                ours.file,
                ours.line,
                f"queue '{name}': {bicep_key} is {json.dumps(bicep_value)}, not an ISO 8601 duration",
                f"write {bicep_key} as a duration literal (PnDTnHnMnS)",
            )
        elif not _same(expected, value):
            report.add(
                theirs.file,
                theirs.line,
                f"queue '{name}': {key} is {json.dumps(value)} here but must be {json.dumps(expected)}: "
                f"the Bicep's {bicep_key} is {json.dumps(bicep_value)} ({where}) and "
                f"{emulator.EMULATOR_CLAMPED[documented]}",
                f"set {key} to {json.dumps(expected)} (harness/tools/iac/emulator.py EMULATOR_CLAMPED)",
            )
        return
    if _same(bicep_value, value):
        return
    report.add(
        theirs.file,
        theirs.line,
        f"queue '{name}': {key} is {json.dumps(value)} here but {bicep_key} is "
        f"{json.dumps(bicep_value)} in {where}",
        "make the emulator and the Bicep declare the same queue properties (only those in "
        "harness/tools/iac/emulator.py EMULATOR_CLAMPED may differ, as it says)",
    )


DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str) and (da := DURATION.match(a)) and (db := DURATION.match(b)):
        return _seconds(da) == _seconds(db)
    return bool(a == b and type(a) is type(b))


def _seconds(match: re.Match[str]) -> float:
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _check_max_deliveries(
    code: Code, targets: list[Target], declared: list[dict[str, Queue]], report: Report
) -> None:
    defaults = {f.alias: f for f in code.app_fields}
    for deliveries, queue_setting in policy.MAX_DELIVERIES_OF_QUEUE.items():
        if deliveries not in defaults or queue_setting not in defaults:
            report.add(
                "harness/tools/iac/policy.py",
                None,
                f"MAX_DELIVERIES_OF_QUEUE names {deliveries} or {queue_setting}, not in Settings",
                "update the policy",
            )
            continue
        cases = [(defaults[deliveries].default, defaults[queue_setting].default, defaults[deliveries].where)]
        for target in targets:
            count = target.values.get(deliveries, defaults[deliveries].default)
            queue = target.values.get(queue_setting, defaults[queue_setting].default)
            cases.append((count, queue, Where(target.file, target.lines.get(deliveries) or target.line or 0)))
        for count, queue, where in cases:
            if not isinstance(queue, str) or not str(count).isdigit():
                continue
            for queues in declared:
                found = queues.get(queue)
                actual = None
                if found is not None:
                    actual = next(
                        (v for k, v in found.properties.items() if k.lower() == "maxdeliverycount"), None
                    )
                if isinstance(actual, int) and actual != int(count):
                    report.add(
                        where.file,
                        where.line or None,
                        f"{deliveries}={count}, but queue '{queue}' has MaxDeliveryCount {actual} "
                        f"({found.file if found else ''})",
                        f"make {deliveries} equal the queue's MaxDeliveryCount (see settings.py)",
                    )


# --- Cosmos DB ---------------------------------------------------------------------------------


def _check_cosmos(code: Code, app_targets: list[Target], deployment: Deployment, report: Report) -> None:
    fields = {f.alias: f for f in code.app_fields}
    for alias in (policy.COSMOS_DATABASE_SETTING, policy.COSMOS_CONTAINER_SETTING):
        if alias not in fields:
            report.add("harness/tools/iac/policy.py", None, f"Settings has no {alias}", "update the policy")
            return
    constant, constant_where = code.container
    partition_key, key_where = code.partition_key
    wanted_containers = [(constant, _where(constant_where))]
    wanted_databases: list[tuple[Any, str]] = []
    for alias, wanted in (
        (policy.COSMOS_CONTAINER_SETTING, wanted_containers),
        (policy.COSMOS_DATABASE_SETTING, wanted_databases),
    ):
        wanted.append((fields[alias].default, f"the default of {alias}"))
        wanted.extend((t.values[alias], f"{alias} in {t.label}") for t in app_targets if alias in t.values)
    databases = {
        r.get("properties", "resource", "id"): r
        for r in deployment.resources("Microsoft.DocumentDB/databaseAccounts/sqlDatabases")
    }
    containers = {
        r.get("properties", "resource", "id"): r
        for r in deployment.resources("Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers")
    }
    for name, source in wanted_databases:
        if isinstance(name, str) and name not in databases:
            report.add(
                "infra/",
                None,
                f"no Cosmos DB SQL database '{name}' ({source})",
                "declare it (sqlDatabases, properties.resource.id)",
            )
    for name, source in wanted_containers:
        if not isinstance(name, str):
            continue
        container = containers.get(name)
        if container is None:
            report.add(
                "infra/",
                None,
                f"no Cosmos DB container '{name}' ({source})",
                "declare it (sqlDatabases/containers, properties.resource.id)",
            )
            continue
        paths = container.get("properties", "resource", "partitionKey", "paths")
        if paths != [partition_key]:
            report.add(
                container.file.rel,
                container.file.line_of("paths", container.line, container.end_line) or container.line,
                f"container '{name}' has partition key paths {paths}, the adapter uses "
                f"'{partition_key}' ({_where(key_where)})",
                f"set partitionKey: {{ paths: ['{partition_key}'], kind: 'Hash' }}",
            )


# --- Python version ----------------------------------------------------------------------------


def _check_python(root: Path, deployment: Deployment | None, report: Report) -> None:
    """The Function App's runtime and the agent's image run the Python the project targets (the
    minimum of requires-python): the code, its lint and type checks assume that version, and the
    worker the app pins (azure-functions-runtime, 3.13+) exists only for some versions."""
    try:
        target, specifier, where = code_facts.required_python(root)
        images = code_facts.python_images(root)
    except code_facts.CodeError as error:
        report.add(
            "harness/tools/iac",
            None,
            f"cannot tell which Python the project targets: {error}",
            "fix that file",
        )
        return
    why = f"{_where(where)} requires-python '{specifier}'"
    if not images:
        report.add(
            code_facts.AGENT_DOCKERFILE,
            None,
            "no FROM python:X.Y image: cannot tell which Python the agent runs",
            f"build the agent FROM python:{target}-slim",
        )
    for image, at in images:
        if image != target:
            report.add(
                at.file,
                at.line,
                f"the agent image runs Python {image}, the project targets {target} ({why})",
                f"use FROM python:{target}-slim, or change requires-python with it",
            )
    if deployment is None:
        return
    for site in (r for i in deployment.instances for r in i.all_resources() if is_function_app(r)):
        label = f"the Function App '{site.symbol}'"
        runtime = site.get("properties", "functionAppConfig", "runtime")
        fix = f"set functionAppConfig.runtime to {{ name: 'python', version: '{target}' }}"
        if not isinstance(runtime, dict):
            report.add(site.file.rel, site.line, f"{label} states no functionAppConfig.runtime", fix)
            continue
        name, version = runtime.get("name"), runtime.get("version")
        start = site.file.line_of("runtime:", site.line, site.end_line) or site.line
        line = site.file.line_of("version:", start, site.end_line) or start
        if isinstance(name, Unknown) or isinstance(version, Unknown):
            why_unknown = next(v.why for v in (name, version) if isinstance(v, Unknown))
            report.add(
                site.file.rel,
                line,
                f"{label}: cannot read its runtime offline ({why_unknown})",
                "write the runtime name and version as literals, parameters or variables",
            )
        elif name != "python" or str(version) != target:
            report.add(
                site.file.rel,
                line,
                f"{label} runs {name} {version}, the project targets Python {target} ({why})",
                fix + ", or change requires-python with it",
            )
