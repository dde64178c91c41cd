"""Rules over infra/ alone: parsing, module and parameter wiring, no keys or passwords, identity-only
authentication, allowed roles, Service Bus queue properties."""

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.tools.iac.bicep import BicepFile, Instance, Loader, Resource, Unknown, unwrap
from harness.tools.iac.policy import ALLOWED_ROLES, DEPLOYMENT_OPTIONS, MAX_DELIVERY_COUNT_LIMIT
from harness.tools.iac.problems import Report

GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
NO_KEYS = "use the managed identity and an RBAC role (identity-based connection) instead"
SECRETS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"\blist(Keys|ConnectionStrings|AccountSas|ServiceSas|Secrets|Credentials?)\s*\(", re.I),
        "reads a key at deployment",
        NO_KEYS,
    ),
    (re.compile(r"AccountKey\s*=", re.I), "a connection string with an account key", NO_KEYS),
    (re.compile(r"SharedAccessKey", re.I), "a Service Bus shared access key", NO_KEYS),
    (
        re.compile(r"\b(?:primary|secondary)?sharedKeys?\b", re.I),
        "a Log Analytics workspace shared key",
        "send logs through a diagnostic setting (Container Apps: destination 'azure-monitor'); the "
        "workspace has local authentication off",
    ),
    (
        re.compile(r"InstrumentationKey", re.I),
        "an Application Insights instrumentation key",
        "link a workbook by the component's resource ID (sourceId); telemetry uses the connection "
        "string with Entra authentication",
    ),
    (
        re.compile(r"password", re.I),
        "a password",
        "no passwords anywhere: Entra ID only (managed identities, Entra-only SQL)",
    ),
)
ALLOWED_GUIDS = {guid.lower() for guid in ALLOWED_ROLES.values()}
ROLE_LIST = "harness/tools/iac/policy.py ALLOWED_ROLES"


@dataclass
class Deployment:
    """main.bicep and every module instance under it, evaluated."""

    instances: list[Instance]

    def resources(self, *types: str) -> list[Resource]:
        wanted = {t.lower() for t in types}
        return [
            resource
            for instance in self.instances
            for resource in instance.all_resources()
            if resource.type.lower() in wanted and not resource.existing
        ]


def strip_comments(text: str) -> str:
    """Bicep without ``//`` and ``/* */`` comments (strings kept; line numbers kept)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("'''", i):
            end = text.find("'''", i + 3)
            end = n if end < 0 else end + 3
            out.append(text[i:end])
            i = end
        elif text[i] == "'":
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def check_infra(root: Path, report: Report) -> Deployment | None:
    infra = root / "infra"
    main_path = infra / "main.bicep"
    if not main_path.is_file():
        report.add("infra/main.bicep", None, "missing", "write the azd entry point infra/main.bicep")
        return None
    loader = Loader(root)
    for path in sorted(infra.rglob("*.bicep")):
        loader.load(path)
    for path, error in sorted(loader.errors.items()):
        report.add(
            path.relative_to(root.resolve()).as_posix(),
            error.line,
            f"does not parse with pycep-parser 0.7.1: {error.message}",
            "write Bicep in the subset the offline tools parse (infra/README.md: one-line ternaries, "
            "no types, lambdas, spread or conditions inside loops)",
        )
    for path in sorted(infra.rglob("*.bicepparam")):
        report.add(
            path.relative_to(root).as_posix(), None, "a .bicepparam file", "use main.parameters.json instead"
        )
    for bicep_file in loader.files.values():
        _check_modules(bicep_file, loader, report)
    main = loader.files.get(main_path.resolve())
    if main is None:
        return None
    _check_parameters_json(root, main, report)
    _scan_text(root, report)
    instance = Instance(main, {}, loader)
    instance.complete_params(parameters_json_values(root))
    deployment = Deployment(list(instance.walk()))
    check_resources(deployment, report)
    return deployment


def _check_modules(owner: BicepFile, loader: Loader, report: Report) -> None:
    for symbol, decl in owner.section("modules").items():
        line = decl.get("__start_line__")
        path = loader.module_path(owner, decl)
        if path is None:
            report.add(
                owner.rel, line, f"module {symbol} is not a local file", "use a local module under infra/"
            )
            continue
        target_rel = path.relative_to(loader.root.resolve()).as_posix() if path.is_file() else str(path)
        if not path.is_file():
            report.add(
                owner.rel, line, f"module {symbol}: {target_rel} does not exist", "fix the module path"
            )
            continue
        target = loader.module_file(owner, decl)
        if target is None:
            continue  # its parse error is reported
        _, body = unwrap(decl.get("config"))
        passed = body.get("params") if isinstance(body, dict) else None
        if passed is None:
            passed = {}
        if not isinstance(passed, dict):
            report.add(owner.rel, line, f"module {symbol}: params is not an object", "pass params: { ... }")
            continue
        declared = target.section("parameters")
        for name, param in declared.items():
            if param.get("default") is None and not target.is_nullable_param(name) and name not in passed:
                report.add(
                    owner.rel,
                    line,
                    f"module {symbol} does not pass required parameter '{name}' of {target.rel}",
                    f"pass {name} in the module's params, or give it a default in {target.rel}",
                )
        for name in passed:
            if name not in declared:
                report.add(
                    owner.rel,
                    owner.line_of(name, line or 1, decl.get("__end_line__")) or line,
                    f"module {symbol} passes '{name}', which {target.rel} does not declare",
                    f"remove it, or add 'param {name}' to {target.rel}",
                )


def parameters_json(root: Path) -> tuple[dict[str, Any] | None, str]:
    path = root / "infra" / "main.parameters.json"
    if not path.is_file():
        return None, "missing"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        return None, f"not JSON: {error}"
    parameters = doc.get("parameters") if isinstance(doc, dict) else None
    if not isinstance(parameters, dict):
        return None, "has no 'parameters' object"
    return parameters, ""


def parameters_json_values(root: Path) -> dict[str, Any]:
    """The values of main.parameters.json; ``${VAR}`` values are Unknown. A deployment option
    (``policy.DEPLOYMENT_OPTIONS``) left to azd is left out, so it takes main.bicep's default:
    the checker evaluates every option's values explicitly (``variants``)."""
    parameters, _ = parameters_json(root)
    values: dict[str, Any] = {}
    for name, entry in (parameters or {}).items():
        value = _azd_unknown(entry.get("value") if isinstance(entry, dict) else None)
        if not (name in DEPLOYMENT_OPTIONS and isinstance(value, Unknown)):
            values[name] = value
    return values


def _azd_unknown(value: Any) -> Any:
    """azd fills ``${VAR}`` / ``${VAR=default}`` from its environment at deployment time, anywhere
    in the file (inside arrays and objects too): each such string is Unknown offline."""
    if isinstance(value, str) and "${" in value:
        return Unknown("set by azd")
    if isinstance(value, list):
        return [_azd_unknown(item) for item in value]
    if isinstance(value, dict):
        return {key: _azd_unknown(item) for key, item in value.items()}
    return value


def _check_parameters_json(root: Path, main: BicepFile, report: Report) -> None:
    rel = "infra/main.parameters.json"
    parameters, problem = parameters_json(root)
    if parameters is None:
        report.add(rel, None, problem, "write it in the ARM parameters format azd reads")
        return
    text = (root / rel).read_text(encoding="utf-8")
    declared = main.section("parameters")
    for name, param in declared.items():
        if param.get("default") is None and not main.is_nullable_param(name) and name not in parameters:
            report.add(
                rel,
                None,
                f"main.bicep's required parameter '{name}' has no value",
                f'add "{name}": {{"value": ...}} (or give it a default in main.bicep)',
            )
    for name in parameters:
        if name not in declared:
            report.add(
                rel,
                _line_in(text, f'"{name}"'),
                f"'{name}' is not a parameter of main.bicep",
                "remove it, or declare it in main.bicep",
            )


def _line_in(text: str, needle: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    return None


def _scan_text(root: Path, report: Report) -> None:
    for path in sorted((root / "infra").rglob("*")):
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        rel = path.relative_to(root).as_posix()
        is_bicep = path.suffix == ".bicep"
        code = strip_comments(text) if is_bicep else text
        for number, line in enumerate(code.splitlines(), start=1):
            for pattern, what, fix in SECRETS:
                if match := pattern.search(line):
                    report.add(rel, number, f"'{match.group(0)}': {what}", fix)
            if is_bicep:
                for guid in GUID.findall(line):
                    if guid.lower() not in ALLOWED_GUIDS:
                        report.add(
                            rel,
                            number,
                            f"GUID {guid} is not an allowed built-in role",
                            f"use a role from {ROLE_LIST} (add one there, by name, with a reason)",
                        )


def _require(report: Report, resource: Resource, path: tuple[str, ...], expected: object, why: str) -> None:
    value = resource.get(*path)
    if value is expected or (value == expected and type(value) is type(expected)):
        return
    key = path[-1]
    shown = (
        "not set"
        if value is None
        else f"unknown offline ({value.why})"
        if isinstance(value, Unknown)
        else value
    )
    report.add(
        resource.file.rel,
        resource.file.line_of(key, resource.line, resource.end_line) or resource.line,
        f"{resource.type} '{resource.symbol}': {'.'.join(path)} is {shown}, must be {json.dumps(expected)}",
        f"set {key}: {json.dumps(expected)} literally ({why})",
    )


def check_resources(deployment: Deployment, report: Report) -> None:
    for resource in deployment.resources("Microsoft.ServiceBus/namespaces"):
        _require(report, resource, ("properties", "disableLocalAuth"), True, "Entra ID only, no SAS keys")
    for resource in deployment.resources("Microsoft.DocumentDB/databaseAccounts"):
        _require(report, resource, ("properties", "disableLocalAuth"), True, "Entra ID only, no account keys")
    for resource in deployment.resources("Microsoft.Storage/storageAccounts"):
        _require(report, resource, ("properties", "allowSharedKeyAccess"), False, "no shared keys")
    for resource in deployment.resources("Microsoft.Insights/components"):
        _require(report, resource, ("properties", "DisableLocalAuth"), True, "Entra-authenticated telemetry")
    for resource in deployment.resources("Microsoft.OperationalInsights/workspaces"):
        _require(
            report,
            resource,
            ("properties", "features", "disableLocalAuth"),
            True,
            "no workspace shared keys: Entra ID and Azure RBAC only",
        )
    for resource in deployment.resources("Microsoft.App/managedEnvironments"):
        _check_environment_logs(resource, report)
    _check_sql(deployment, report)
    check_workbooks(deployment, report)
    for resource in deployment.resources("Microsoft.Authorization/roleAssignments"):
        _check_role_assignment(resource, report, needs_principal_type=True)
    for resource in deployment.resources("Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments"):
        _check_role_assignment(resource, report, needs_principal_type=False)
    for resource in deployment.resources("Microsoft.ServiceBus/namespaces/queues"):
        check_queue_properties(
            resource.file.rel,
            resource.line,
            f"queue {queue_name(resource)}",
            resource.get("properties") or {},
            report,
        )


def _check_environment_logs(resource: Resource, report: Report) -> None:
    """A Container Apps environment sends its logs without the workspace's shared key: destination
    'log-analytics' takes ``logAnalyticsConfiguration.sharedKey``, which a workspace with local
    authentication off rejects; 'azure-monitor' (with a diagnostic setting) or 'none' need no key."""
    logs = resource.get("properties", "appLogsConfiguration")
    destination = logs.get("destination") if isinstance(logs, dict) else None
    keyed = isinstance(logs, dict) and logs.get("logAnalyticsConfiguration") is not None
    if destination in ("azure-monitor", "none") and not keyed:
        return
    shown = "not set" if destination is None else json.dumps(destination, default=repr)
    report.add(
        resource.file.rel,
        resource.file.line_of("appLogsConfiguration", resource.line, resource.end_line) or resource.line,
        f"{resource.type} '{resource.symbol}': appLogsConfiguration.destination is {shown}"
        + (" with a logAnalyticsConfiguration (the workspace's shared key)" if keyed else ""),
        "set destination: 'azure-monitor' and send the logs to the workspace with a "
        "Microsoft.Insights/diagnosticSettings on the environment (the workspace has local auth off)",
    )


def _check_sql(deployment: Deployment, report: Report) -> None:
    """Entra-only: every place that states azureADOnlyAuthentication says true, and one does."""
    why = "Entra-only SQL authentication, no SQL logins"
    path = ("properties", "azureADOnlyAuthentication")
    separate = deployment.resources("Microsoft.Sql/servers/azureADOnlyAuthentications")
    for resource in separate:
        _require(report, resource, path, True, why)
    for resource in deployment.resources("Microsoft.Sql/servers"):
        inline = ("properties", "administrators", "azureADOnlyAuthentication")
        if resource.get(*inline) is not None or not separate:
            _require(report, resource, inline, True, why)


def _check_role_assignment(resource: Resource, report: Report, *, needs_principal_type: bool) -> None:
    where = (resource.file.rel, resource.line)
    properties = resource.get("properties")
    if not isinstance(properties, dict):
        report.add(*where, f"role assignment '{resource.symbol}' has no properties", "set properties")
        return
    if needs_principal_type and properties.get("principalType") is None:
        report.add(
            *where,
            f"role assignment '{resource.symbol}' does not set principalType",
            "set principalType: 'ServicePrincipal' (managed identities) or the principal's type",
        )
    role = properties.get("roleDefinitionId")
    text = role if isinstance(role, str) else role.partial if isinstance(role, Unknown) else ""
    guids = GUID.findall(text)
    if not guids:
        why = role.why if isinstance(role, Unknown) else repr(role)
        report.add(
            *where,
            f"role assignment '{resource.symbol}': cannot tell its role offline ({why})",
            f"name the role's GUID from {ROLE_LIST} in a literal, variable or module parameter",
        )
    elif guids[-1].lower() not in ALLOWED_GUIDS:
        report.add(
            *where,
            f"role assignment '{resource.symbol}' grants role {guids[-1]}, which is not allowed",
            f"use a least-privilege role from {ROLE_LIST}",
        )


def queue_name(resource: Resource) -> Any:
    name = resource.name
    if isinstance(name, Unknown) and isinstance(resource.raw, dict):
        raw = resource.raw.get("name")  # '${namespace.name}/orders': the part after the slash is enough
        if isinstance(raw, str) and "/" in raw and "${" not in raw.rsplit("/", 1)[-1]:
            return raw.rsplit("/", 1)[-1]
    return name.rsplit("/", 1)[-1] if isinstance(name, str) else name


def check_queue_properties(file: str, line: int | None, label: str, properties: Any, report: Report) -> None:
    """The same rules for a Bicep queue (camelCase) and an emulator Config.json queue (PascalCase)."""
    values = {str(k).lower(): v for k, v in properties.items()} if isinstance(properties, dict) else {}
    for key in ("requiresDuplicateDetection", "deadLetteringOnMessageExpiration"):
        if values.get(key.lower()) is not True:
            report.add(
                file,
                line,
                f"{label}: {key} is {values.get(key.lower(), 'not set')}, must be true",
                f"set {key}: true (E9, E18)",
            )
    count = values.get("maxdeliverycount")
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_DELIVERY_COUNT_LIMIT:
        shown = count.why if isinstance(count, Unknown) else count
        report.add(
            file,
            line,
            f"{label}: maxDeliveryCount is {shown}, must be 1..{MAX_DELIVERY_COUNT_LIMIT}",
            f"set a small maxDeliveryCount (at most {MAX_DELIVERY_COUNT_LIMIT}) literally",
        )


WORKBOOK_VERSION = "Notebook/1.0"
PLACEHOLDER = re.compile(r"__[A-Z][A-Z_]*__")


def check_workbooks(deployment: Deployment, report: Report) -> None:
    """The operator's workbook (infra/modules/workbook.bicep) is deployed, shared, listed under the
    Application Insights component the deployment creates (``sourceId`` traced to it, not a typed
    ID), and its content, where known offline, is a Notebook/1.0 with every placeholder filled."""
    workbooks = deployment.resources("Microsoft.Insights/workbooks")
    if not workbooks:
        report.add(
            "infra/main.bicep",
            1,
            "no Microsoft.Insights/workbooks deployed: the operator's workbook is missing",
            "deploy modules/workbook.bicep from main.bicep (docs/operating.md)",
        )
    components = {
        (instance.path, resource.symbol)
        for instance in deployment.instances
        for resource in instance.all_resources()
        if resource.type.lower() == "microsoft.insights/components" and not resource.existing
    }
    for resource in workbooks:
        where = resource.file.rel
        _require(report, resource, ("kind",), "shared", "a workbook every operator with access sees")
        _require(report, resource, ("properties", "category"), "workbook", "listed under Workbooks")
        source = resource.get("properties", "sourceId")
        origin = source.origin if isinstance(source, Unknown) else None
        if origin not in components:
            report.add(
                where,
                resource.file.line_of("sourceId", resource.line, resource.end_line) or resource.line,
                f"workbook '{resource.symbol}': sourceId is not the id of an Application Insights "
                "component this deployment creates",
                "pass the component's id (monitoring.outputs.applicationInsightsId) as sourceId",
            )
        if resource.get("identity") is not None:
            report.add(
                where,
                resource.line,
                f"workbook '{resource.symbol}' has an identity",
                "remove it: a workbook's queries run as the signed-in user (Azure RBAC)",
            )
        content = resource.get("properties", "serializedData")
        # The deployment fills in IDs known only then; the rest of the text is known offline.
        known = content.partial if isinstance(content, Unknown) else content
        if isinstance(known, str) and known:
            _check_workbook_content(where, resource.line, known, report)
        else:
            report.add(
                where,
                resource.line,
                f"workbook '{resource.symbol}': serializedData is not known offline",
                "load it with loadTextContent() from infra/workbooks/ and fill it in with replace()",
            )


def _check_workbook_content(where: str, line: int, content: str, report: Report) -> None:
    try:
        parsed = json.loads(content)
    except json.JSONDecodeError as error:
        report.add(where, line, f"workbook content is not JSON: {error}", "fix the workbook file")
        return
    if not isinstance(parsed, dict) or parsed.get("version") != WORKBOOK_VERSION:
        report.add(where, line, f"workbook content is not a {WORKBOOK_VERSION}", "export it from the portal")
    for left in sorted(set(PLACEHOLDER.findall(content))):
        report.add(
            where, line, f"workbook placeholder {left} is never filled in", "replace() it in workbook.bicep"
        )
