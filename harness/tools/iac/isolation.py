"""Submitting apps are isolated (E16): what an app may submit, read or receive follows from its
identity, and the infrastructure gives it nothing else. Proved on the Bicep:

- ``main.parameters.json`` lists each app as ``{ name, clientId, principalId }``: a valid, unique
  name; each ID a GUID, empty, or left to azd (``${VAR}``); no ID twice;
- every app has its queue ``status-<name>`` in the Bicep and in
  ``harness/emulators/servicebus-config/Config.json``;
- a submitting app's identity holds Azure Service Bus Data Receiver on its own ``status-<name>``
  and no other role: no Send on any queue (orders, agent-requests, agent-replies: the Function
  App is the only sender to orders; status queues: only the Function App writes statuses), no
  Receive on another queue, nothing at namespace or wider scope, no Data Owner, no role on any
  other service; and no role assignment is deployed with an empty principal ID;
- the Function App's ``SAS_SUBMITTERS`` is built from ``submittingApps`` (``name=clientId`` of
  each app with a client ID) and the deployment never sets ``WEBSITE_AUTH_ENABLED``;
- ``SAS_SUBMITTERS`` in ``local.settings.sample.json`` is well-formed (its queues are checked with
  the other queues, ``cross_checks``);
- App Service Authentication whenever ``frontEndClientId`` is set (``easy_auth``).

``main.parameters.json`` leaves the IDs to azd, so the wiring rules evaluate ``main.bicep`` again
with probe values (``PROBE_APPS``, ``PROBE_FRONT_END``): they hold for any registered app, not only
for the values in the file. Problems found that way name the probe apps (``probe-1``, ...).
"""

import json
from dataclasses import dataclass
from pathlib import Path

from harness.tools.iac import cross_checks, easy_auth, policy, submitters
from harness.tools.iac.bicep import Instance, Resource, ResourceRef, Unknown
from harness.tools.iac.infra_rules import (
    GUID,
    Deployment,
    parameters_json,
    parameters_json_values,
    queue_name,
)
from harness.tools.iac.problems import Report

PROBE_APPS: tuple[dict[str, str], ...] = (
    {
        "name": "probe-1",
        "clientId": "c1000000-0000-4000-8000-000000000001",
        "principalId": "b1000000-0000-4000-8000-000000000001",
    },
    {
        "name": "probe-2",
        "clientId": "c2000000-0000-4000-8000-000000000002",
        "principalId": "b2000000-0000-4000-8000-000000000002",
    },
    # Listed before it is registered: a queue, but no client ID and no identity yet.
    {"name": "probe-3", "clientId": "", "principalId": ""},
)
PROBE_FRONT_END = "f0000000-0000-4000-8000-00000000000f"
PARAMETERS = "infra/main.parameters.json"
ROLE_TYPES = (
    "Microsoft.Authorization/roleAssignments",
    "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments",
)
ONLY_ROLE = (
    "a submitting app gets Azure Service Bus Data Receiver on its own status-<name> queue and no other "
    "role: it submits over HTTP (the Function App alone sends to orders and to status queues)"
)


def check(root: Path, deployment: Deployment | None, report: Report) -> None:
    _check_parameters(root, report)
    _check_sample(root, report)
    if deployment is None or not deployment.instances:
        return
    main = deployment.instances[0]
    declared = main.file.section("parameters")
    for name in (policy.SUBMITTING_APPS_PARAM, policy.FRONT_END_CLIENT_ID_PARAM):
        if name not in declared:
            report.add(main.file.rel, None, f"main.bicep declares no parameter '{name}'", "declare it (E16)")
    _check_platform_settings(deployment, report)
    _check_real_queues(root, deployment, report)
    if policy.SUBMITTING_APPS_PARAM not in declared:
        return
    probe = _probe(root, main, PROBE_FRONT_END)
    _check_roles(probe, main, report)
    _check_probe_queues(probe, main, report)
    _check_submitters_setting(probe, report)
    if policy.FRONT_END_CLIENT_ID_PARAM in declared:
        easy_auth.check(probe, _probe(root, main, ""), PROBE_APPS, PROBE_FRONT_END, report)


def _probe(root: Path, main: Instance, front_end: str) -> Deployment:
    """main.bicep evaluated with the probe apps and this front end client ID."""
    params = {
        **parameters_json_values(root),
        policy.SUBMITTING_APPS_PARAM: [dict(app) for app in PROBE_APPS],
        policy.FRONT_END_CLIENT_ID_PARAM: front_end,
    }
    instance = Instance(main.file, {}, main.loader)
    instance.complete_params(params)
    return Deployment(list(instance.walk()))


def _param_line(main: Instance) -> int | None:
    return main.file.line_of(f"param {policy.SUBMITTING_APPS_PARAM} ")


# --- main.parameters.json and the sample ---------------------------------------------------------


def _check_parameters(root: Path, report: Report) -> None:
    parameters, _ = parameters_json(root)  # a missing or broken file is reported by infra_rules
    entry = (parameters or {}).get(policy.SUBMITTING_APPS_PARAM)
    if not isinstance(entry, dict):
        return
    text = (root / PARAMETERS).read_text(encoding="utf-8")
    head = _line_in(text, f'"{policy.SUBMITTING_APPS_PARAM}"')
    apps = entry.get("value")
    if not isinstance(apps, list):
        report.add(PARAMETERS, head, f"{policy.SUBMITTING_APPS_PARAM} is not a list", "list the apps")
        return
    seen: dict[str, dict[str, int]] = {key: {} for key in policy.SUBMITTING_APP_KEYS}
    shape = "{ " + ", ".join(f'"{k}": ...' for k in policy.SUBMITTING_APP_KEYS) + " }"
    for index, app in enumerate(apps):
        where = f"{policy.SUBMITTING_APPS_PARAM}[{index}]"
        if not isinstance(app, dict):
            report.add(PARAMETERS, head, f"{where} is not an object", f"write it as {shape}")
            continue
        line = _line_in(text, json.dumps(app.get("name"))) or head
        for key in sorted(set(policy.SUBMITTING_APP_KEYS) ^ set(app)):
            what = "has no" if key in policy.SUBMITTING_APP_KEYS else "has the unknown key"
            report.add(PARAMETERS, line, f"{where} {what} '{key}'", f"write it as {shape} (E16)")
        name = app.get("name")
        if not (isinstance(name, str) and submitters.NAME.fullmatch(name)):
            report.add(
                PARAMETERS,
                line,
                f"{where}: name {json.dumps(name)} is not a registered name",
                f"a literal matching {policy.SUBMITTER_NAME}: it names the queue status-<name>",
            )
        for key in ("clientId", "principalId"):
            value = app.get(key, "")
            if not isinstance(value, str) or not (value == "" or "${" in value or GUID.fullmatch(value)):
                report.add(
                    PARAMETERS,
                    line,
                    f"{where}: {key} {json.dumps(value)} is not a GUID",
                    "a GUID, '' (not yet) or an azd variable '${VAR=}'",
                )
        for key, values in seen.items():
            value = app.get(key)
            if isinstance(value, str) and value and "${" not in value:
                if value.lower() in values:
                    report.add(
                        PARAMETERS,
                        line,
                        f"{where}: {key} '{value}' is also that of "
                        f"{policy.SUBMITTING_APPS_PARAM}[{values[value.lower()]}]",
                        "each app has its own name and identity",
                    )
                values.setdefault(value.lower(), index)


def _check_sample(root: Path, report: Report) -> None:
    sample = cross_checks.sample_target(root, Report())  # its own problems are reported elsewhere
    if sample is None or policy.SUBMITTERS_SETTING not in sample.values:
        return
    value = sample.values[policy.SUBMITTERS_SETTING]
    line = sample.lines.get(policy.SUBMITTERS_SETTING)
    errors = submitters.parse(value)[1] if isinstance(value, str) else [f"{json.dumps(value)} is not text"]
    for error in errors:
        report.add(sample.file, line, f"{policy.SUBMITTERS_SETTING}: {error}", f"write {submitters.FORMAT}")


def _line_in(text: str, needle: str) -> int | None:
    return next((n for n, line in enumerate(text.splitlines(), start=1) if needle in line), None)


# --- roles -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    kind: str  # "queue", "namespace", "wider" or "unknown"
    name: str  # the queue or namespace, or what the scope is

    def __str__(self) -> str:
        return {"queue": f"queue '{self.name}'", "namespace": f"namespace '{self.name}'"}.get(
            self.kind, self.name
        )


def scope_of(resource: Resource) -> Scope:
    scope = resource.get("scope")
    if scope is None:
        return Scope("wider", "the whole resource group (no scope)")
    if isinstance(scope, ResourceRef):
        found = scope.instance.resources(scope.symbol)
        if len(found) == 1:
            kind = found[0].type.lower()
            if kind == "microsoft.servicebus/namespaces/queues":
                name = queue_name(found[0])
                if isinstance(name, str):
                    return Scope("queue", name)
                return Scope("unknown", f"queue '{scope.symbol}', whose name is not known offline")
            elif kind == "microsoft.servicebus/namespaces":
                name = found[0].name
                return Scope("namespace", name if isinstance(name, str) else scope.symbol)
            else:
                return Scope("wider", f"a {found[0].type}")
    why = scope.why if isinstance(scope, Unknown) else type(scope).__name__
    return Scope("unknown", f"a scope not known offline ({why})")


def role_of(resource: Resource) -> str:
    role = resource.get("properties", "roleDefinitionId")
    text = role if isinstance(role, str) else role.partial if isinstance(role, Unknown) else ""
    guids = GUID.findall(text)
    return guids[-1].lower() if guids else "?"


def _role_problems(resource: Resource, role: str, scope: Scope, own: str) -> list[str]:
    name, rights = policy.SERVICE_BUS_ROLES.get(role, ("", frozenset[str]()))
    if not name or not resource.type.lower().endswith("/roleassignments"):
        return [f"grants it role {role} outside Service Bus"]
    found = [f"grants it {name}"] if role == policy.SERVICE_BUS_DATA_OWNER else []
    if scope.kind == "queue":
        if "send" in rights:
            found.append(f"lets it send to {scope}")
        if "receive" in rights and scope.name != own:
            found.append(f"lets it receive from {scope}, not its own '{own}'")
    elif scope.kind == "namespace":
        found.append(f"at namespace scope ({scope}): every queue, every other app's")
    elif scope.kind == "wider":
        found.append(f"at {scope}: every queue in it")
    else:
        found.append(f"at {scope}: scope roles to an existing queue resource")
    return found


def _check_roles(probe: Deployment, main: Instance, report: Report) -> None:
    apps = {
        app["principalId"].lower(): (i, app["name"]) for i, app in enumerate(PROBE_APPS) if app["principalId"]
    }
    readers: set[int] = set()
    reported: set[tuple[str, int]] = set()
    for resource in probe.resources(*ROLE_TYPES):
        principal = resource.get("properties", "principalId")
        if resource.deployed is True and principal == "":
            report.add(
                resource.file.rel,
                resource.line,
                f"role assignment '{resource.symbol}' is deployed with an empty principalId "
                "(as for a submitting app listed before its identity exists)",
                "deploy it only if (!empty(<its principal ID>))",
            )
        if resource.deployed is False or not isinstance(principal, str) or principal.lower() not in apps:
            continue
        index, name = apps[principal.lower()]
        own = f"{policy.STATUS_QUEUE_PREFIX}{name}"
        role, scope = role_of(resource), scope_of(resource)
        is_assignment = resource.type.lower().endswith("/roleassignments")
        if is_assignment and role == policy.SUBMITTER_ROLE and scope == Scope("queue", own):
            readers.add(index)
            continue
        problems = _role_problems(resource, role, scope, own)
        if (resource.file.rel, resource.line) not in reported:
            reported.add((resource.file.rel, resource.line))
            report.add(
                resource.file.rel,
                resource.line,
                f"role assignment '{resource.symbol}' gives the identity of {policy.SUBMITTING_APPS_PARAM}"
                f"[{index}] ('{name}'): {'; '.join(problems)}",
                ONLY_ROLE,
            )
    for index, app in enumerate(PROBE_APPS):
        if app["principalId"] and index not in readers:
            own = f"{policy.STATUS_QUEUE_PREFIX}{app['name']}"
            report.add(
                main.file.rel,
                _param_line(main),
                f"the identity of {policy.SUBMITTING_APPS_PARAM}[{index}] ('{app['name']}') gets no Azure "
                f"Service Bus Data Receiver on its queue '{own}': it cannot read its statuses",
                "assign it, scoped to that queue, once its principalId is known (submitter-rbac.bicep)",
            )


# --- status queues and settings ----------------------------------------------------------------


def _check_probe_queues(probe: Deployment, main: Instance, report: Report) -> None:
    queues = cross_checks.bicep_queues(probe, Report())
    for index, app in enumerate(PROBE_APPS):
        own = f"{policy.STATUS_QUEUE_PREFIX}{app['name']}"
        if own not in queues:
            report.add(
                main.file.rel,
                _param_line(main),
                f"{policy.SUBMITTING_APPS_PARAM}[{index}] ('{app['name']}') gets no queue '{own}' "
                "in the Bicep",
                "declare one status queue per app: "
                "[for app in submittingApps: { name: 'status-${app.name}' ... }]",
            )


def _check_real_queues(root: Path, deployment: Deployment, report: Report) -> None:
    """The apps main.parameters.json lists have their queues, in the Bicep and in the emulator."""
    parameters, _ = parameters_json(root)
    entry = (parameters or {}).get(policy.SUBMITTING_APPS_PARAM)
    apps = entry.get("value") if isinstance(entry, dict) else None
    if not isinstance(apps, list):
        return
    text = (root / PARAMETERS).read_text(encoding="utf-8")
    places = {"the Bicep": cross_checks.bicep_queues(deployment, Report())}
    emulator = cross_checks.emulator_queues(root, Report())
    if emulator is not None:
        places[cross_checks.EMULATOR_CONFIG] = emulator
    for app in apps:
        name = app.get("name") if isinstance(app, dict) else None
        if not isinstance(name, str):
            continue
        own = f"{policy.STATUS_QUEUE_PREFIX}{name}"
        for label, queues in places.items():
            if own not in queues:
                report.add(
                    PARAMETERS,
                    _line_in(text, json.dumps(name)),
                    f"submitting app '{name}' has no queue '{own}' in {label}",
                    f"declare '{own}' in {label} (copy a status-* queue)",
                )


def _check_submitters_setting(probe: Deployment, report: Report) -> None:
    expected = [(app["name"], app["clientId"]) for app in PROBE_APPS if app["clientId"]]
    shown = ",".join(f"{name}={client}" for name, client in expected)
    for target in cross_checks.function_apps(probe, Report()):
        if policy.SUBMITTERS_SETTING not in target.values:
            continue  # the settings rule reports it: SAS_SUBMITTERS is a Settings alias
        value = target.values[policy.SUBMITTERS_SETTING]
        line = target.lines.get(policy.SUBMITTERS_SETTING) or target.line
        if not isinstance(value, str):
            why = value.why if isinstance(value, Unknown) else type(value).__name__
            report.add(
                target.file,
                line,
                f"{target.label}: {policy.SUBMITTERS_SETTING} cannot be computed offline from "
                f"{policy.SUBMITTING_APPS_PARAM} ({why})",
                "build it from submittingApps with variables, for-expressions, join(), take(), ternaries",
            )
            continue
        pairs, errors = submitters.parse(value)
        if errors or sorted(pairs) != sorted(expected):
            report.add(
                target.file,
                line,
                f"{target.label}: with the probe {policy.SUBMITTING_APPS_PARAM} "
                "(harness/tools/iac/isolation.py) "
                f"{policy.SUBMITTERS_SETTING} is '{value}', not '{shown}'",
                "build it from submittingApps: name=clientId of each app with a client ID, comma-separated",
            )


def _check_platform_settings(deployment: Deployment, report: Report) -> None:
    for target in cross_checks.function_apps(deployment, Report()):
        for name in policy.PLATFORM_SETTINGS:
            if name in target.values:
                report.add(
                    target.file,
                    target.lines.get(name) or target.line,
                    f"{target.label} sets {name}, which App Service sets when App Service Authentication is "
                    "on: set by hand, the app trusts principal headers nothing checked",
                    f"remove {name} (harness/tools/iac/policy.py PLATFORM_SETTINGS)",
                )
