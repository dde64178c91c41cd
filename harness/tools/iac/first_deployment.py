"""A first deployment's three options, checked both ways: the simulator as the remote service
(``deploySimulator``), the deployer's data-plane roles for ``python -m ops``
(``grantDeployerOperatorRoles``) and the sample submitting app (``sampleApp``).

main.parameters.json turns all three on through azd variables, so main.bicep is evaluated here
with all on (and a probe principal ID as the deployer), all off, and with the sample app alone off
(the deployer's roles on: they must then leave out the sample app's status queue):

- on: a Container App tagged ``azd-service-name: simulator`` is deployed in the agent's Container
  Apps environment, with ingress and ``external: false`` (reachable from the environment's apps
  only), its own user-assigned identity (neither the agent's nor the Function App's), and that
  identity holds ``policy.SIMULATOR_ROLES`` (AcrPull) and nothing else; the project's resource and
  settings rules hold for it too;
- on: every role the deployer holds is one of ``policy.OPERATOR_ROLES`` at a scope listed there
  (a queue, the sample app's status queue, the Cosmos DB database, the compensation log table, the
  task hub's ``<hubName>Instances`` table), and each of those the ``ops`` commands need is granted;
  on the Durable Task Scheduler (evaluated on too) the task hub is not in storage, and the deployer
  holds no role on an Instances table;
- off: no simulator, no role held by its identity, and no role for the deployer at all;
- the sample app: with ``sampleApp`` on, its queue ``status-<sampleAppName>`` is deployed; off, no
  such queue and no role assignment on it for anyone (the deployer included); main.parameters.json
  does not list it in ``submittingApps`` (main.bicep adds it) and defaults ``sampleApp`` to the
  simulator's variable (``policy.SAMPLE_APP_VALUE``), so turning the simulator off for production
  leaves it out unless asked.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.tools.iac import code_facts, cross_checks, isolation, policy, variants
from harness.tools.iac.bicep import Instance, Resource, ResourceRef, Unknown
from harness.tools.iac.infra_rules import Deployment, check_resources, parameters_json
from harness.tools.iac.problems import Report

PROBE_DEPLOYER = "d0000000-0000-4000-8000-00000000000d"
ROLE_TYPES = isolation.ROLE_TYPES
ON = "[deploySimulator=true grantDeployerOperatorRoles=true sampleApp=true]"
OFF = "[deploySimulator=false grantDeployerOperatorRoles=false sampleApp=false]"
ON_DTS = (
    "[deploySimulator=true grantDeployerOperatorRoles=true sampleApp=true "
    f"durableBackend={policy.DURABLE_TASK_SCHEDULER}]"
)
NO_SAMPLE = "[deploySimulator=true grantDeployerOperatorRoles=true sampleApp=false]"
OPTIONS = (policy.DEPLOY_SIMULATOR_PARAM, policy.OPERATOR_ROLES_PARAM, policy.SAMPLE_APP_PARAM)
INTERPOLATED = re.compile(r"\$\{([^{}]+)\}")
ROLE_NAMES = {guid.lower(): name for name, guid in policy.ALLOWED_ROLES.items()}
Origin = tuple[tuple[str, ...], str]
TABLE = "microsoft.storage/storageaccounts/tableservices/tables"
COMPENSATION_LOG_ADAPTER = "adapters/storage/compensation_log.py"


def check(root: Path, deployment: Deployment | None, report: Report) -> None:
    if deployment is None or not deployment.instances:
        return
    main = deployment.instances[0]
    declared = main.file.section("parameters")
    missing = [p for p in OPTIONS if p not in declared]
    for name in missing:
        report.add(main.file.rel, None, f"main.bicep declares no parameter '{name}'", "declare it (bool)")
    if missing:
        return
    on, off = _evaluate(root, main, on=True), _evaluate(root, main, on=False)
    on_dts = _evaluate(root, main, on=True, backend=policy.DURABLE_TASK_SCHEDULER)
    no_sample = _evaluate(root, main, on=True, sample_app=False)
    tables = _table_scopes(root)
    own = Report()
    check_resources(on, own)
    cross_checks.check(root, on, own)
    for problem in own.problems:
        variants.add_labelled(report, problem, ON)
    _check_simulator_on(on, report)
    _check_simulator_off(off, report)
    _check_deployer_on(on, main, tables, report)
    _check_deployer_on(on_dts, main, tables, report, label=ON_DTS)
    _check_deployer_on(no_sample, main, tables, report, label=NO_SAMPLE)
    _check_deployer_off(off, tables, report)
    sample = _sample_app_name(main)
    _check_sample_app_on(on, main, sample, report)
    for label, variant in ((OFF, off), (NO_SAMPLE, no_sample)):
        _check_sample_app_off(variant, sample, label, report)
    _check_sample_app_parameters(root, sample, report)


def _evaluate(
    root: Path, main: Instance, *, on: bool, backend: str | None = None, sample_app: bool | None = None
) -> Deployment:
    """``sample_app``: the sample app's switch when it differs from the other two (``on``)."""
    return variants.evaluate_with(
        root,
        main,
        {
            **({policy.DURABLE_BACKEND_PARAM: backend} if backend else {}),
            policy.DEPLOY_SIMULATOR_PARAM: on,
            policy.OPERATOR_ROLES_PARAM: on,
            policy.SAMPLE_APP_PARAM: on if sample_app is None else sample_app,
            policy.DEPLOYER_PARAM: PROBE_DEPLOYER,
        },
    )


# --- the simulator -------------------------------------------------------------------------------


@dataclass
class App:
    resource: Resource
    identities: set[Origin]
    environment: Origin | None


def _apps(deployment: Deployment, service: str) -> list[App]:
    found: list[App] = []
    for instance in deployment.instances:
        for resource in instance.all_resources():
            if resource.type.lower() != "microsoft.app/containerapps" or resource.existing:
                continue
            tags = resource.get("tags")
            tagged = tags.get("azd-service-name") if isinstance(tags, dict) else None
            # A literal equal to a symbol reads as that symbol offline (cross_checks' agent rule).
            named = service in f"{resource.symbol} {resource.name if isinstance(resource.name, str) else ''}"
            if not (tagged == service or (not isinstance(tagged, str) and named)):
                continue
            if resource.deployed is False:
                continue
            environment = _origin(resource.get("properties", "environmentId"))
            found.append(App(resource, _identities(instance, resource), environment))
    return found


def _identities(instance: Instance, resource: Resource) -> set[Origin]:
    """The identity resources behind a resource's user-assigned identities (by their origin)."""
    found: set[Origin] = set()
    keys = resource.get("identity", "userAssignedIdentities")
    for key in keys if isinstance(keys, dict) else {}:
        match = INTERPOLATED.fullmatch(key)
        origin = _origin(instance.eval_path(match.group(1).strip(), {})) if match else None
        if origin is not None:
            found.add(origin)
    return found


def _origin(value: object) -> Origin | None:
    return value.origin if isinstance(value, Unknown) else None


def _site_identities(deployment: Deployment) -> set[Origin]:
    """The identities of every Function App."""
    return {
        origin
        for instance in deployment.instances
        for site in instance.all_resources()
        if cross_checks.is_function_app(site)
        for origin in _identities(instance, site)
    }


def _check_simulator_on(on: Deployment, report: Report) -> None:
    simulators = _apps(on, policy.SIMULATOR_SERVICE)
    if not simulators:
        report.add(
            "infra/main.bicep",
            None,
            f"{ON} no Container App tagged azd-service-name '{policy.SIMULATOR_SERVICE}' is deployed",
            "deploy python -m simulator as a Container App when deploySimulator is on (containerapp.bicep)",
        )
        return
    agents = _apps(on, policy.AGENT_SERVICE)
    others = {i for app in agents for i in app.identities} | _site_identities(on)
    for app in simulators:
        resource = app.resource
        where = (resource.file.rel, resource.line)
        label = f"{ON} the simulator Container App '{resource.symbol}'"
        ingress = resource.get("properties", "configuration", "ingress")
        external = ingress.get("external") if isinstance(ingress, dict) else None
        if not isinstance(ingress, dict) or external is not False:
            line = resource.file.line_of("external", resource.line, resource.end_line) or resource.line
            shown = "no ingress" if not isinstance(ingress, dict) else f"ingress.external {external!r}"
            report.add(
                resource.file.rel,
                line,
                f"{label} has {shown}: it must be reachable from the agent's environment only",
                "give it ingress with external: false (internal), never a public endpoint",
            )
        if not app.identities:
            report.add(*where, f"{label} has no user-assigned identity of its own", "give it one")
        elif app.identities & others:
            report.add(
                *where,
                f"{label} runs as the agent's or the Function App's identity",
                "give it its own user-assigned identity (identity.bicep), holding AcrPull only",
            )
        environments = {a.environment for a in agents}
        if app.environment is None or app.environment not in environments:
            report.add(
                *where,
                f"{label} is not in the agent's Container Apps environment",
                "deploy it in the same environment: internal ingress is reachable from that environment only",
            )
        _check_simulator_roles(on, app, report)


def _check_simulator_roles(deployment: Deployment, app: App, report: Report) -> None:
    allowed = {r.lower() for r in policy.SIMULATOR_ROLES}
    for assignment in deployment.resources(*ROLE_TYPES):
        principal = _origin(assignment.get("properties", "principalId"))
        if assignment.deployed is False or principal not in app.identities:
            continue
        role = isolation.role_of(assignment)
        if role not in allowed:
            report.add(
                assignment.file.rel,
                assignment.line,
                f"role assignment '{assignment.symbol}' grants the simulator's identity "
                f"{ROLE_NAMES.get(role, role)}: it needs AcrPull on the registry and nothing else",
                "remove it (harness/tools/iac/policy.py SIMULATOR_ROLES)",
            )


def _check_simulator_off(off: Deployment, report: Report) -> None:
    for app in _apps(off, policy.SIMULATOR_SERVICE):
        report.add(
            app.resource.file.rel,
            app.resource.line,
            f"{OFF} the simulator Container App '{app.resource.symbol}' is deployed",
            "deploy it only if (deploySimulator)",
        )


# --- the deployer's roles ------------------------------------------------------------------------


def _table_scopes(root: Path) -> dict[str, str]:
    """The tables a deployer's role may be scoped to, by name: the compensation log's (the
    adapter's TABLE) and the task hub's Instances table (host.json hubName + "Instances")."""
    scopes: dict[str, str] = {}
    try:
        name, _ = code_facts.module_constant(root, COMPENSATION_LOG_ADAPTER, "TABLE")
        scopes[name] = policy.COMPENSATION_LOG_TABLE
    except (OSError, SyntaxError, code_facts.CodeError):
        pass  # cross_checks reports unreadable code; every table is then named as it is
    try:
        hub = json.loads((root / "host.json").read_text())["extensions"]["durableTask"]["hubName"]
        scopes[f"{hub}Instances"] = policy.TASK_HUB_INSTANCES_TABLE
        scopes[f"{hub}History"] = policy.TASK_HUB_HISTORY_TABLE
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return scopes


def _scope(assignment: Resource, tables: dict[str, str]) -> str:
    """Where a deployer's role applies: a queue's name, 'database', one of ``tables``, or what
    else it is."""
    if assignment.type.lower().endswith("/sqlroleassignments"):
        scope = assignment.get("properties", "scope")
        text = scope if isinstance(scope, str) else scope.partial if isinstance(scope, Unknown) else ""
        return "database" if re.search(r"/dbs/[^/]+$", text) else f"Cosmos DB scope {text or '?'}"
    scope = assignment.get("scope")
    if isinstance(scope, ResourceRef):
        found = scope.instance.resources(scope.symbol)
        if len(found) == 1 and found[0].type.lower() == TABLE:
            name = found[0].name
            return tables.get(name, f"table {name!r}") if isinstance(name, str) else "a table"
    where = isolation.scope_of(assignment)
    return where.name if where.kind == "queue" else str(where)


def _covers(allowed: str, scope: str) -> bool:
    """Whether a scope OPERATOR_ROLES lists covers this one ('status-*': any one status queue)."""
    if allowed == f"{policy.STATUS_QUEUE_PREFIX}*":
        return scope.startswith(policy.STATUS_QUEUE_PREFIX) and scope != allowed
    return scope == allowed


def _allowed(role: str, scope: str) -> bool:
    scopes = policy.OPERATOR_ROLES.get(role, (frozenset[str](), ""))[0]
    return any(_covers(allowed, scope) for allowed in scopes)


def _deployer_roles(deployment: Deployment, tables: dict[str, str]) -> list[tuple[Resource, str, str]]:
    return [
        (a, isolation.role_of(a), _scope(a, tables))
        for a in deployment.resources(*ROLE_TYPES)
        if a.deployed is not False and a.get("properties", "principalId") == PROBE_DEPLOYER
    ]


def _check_deployer_on(
    on: Deployment, main: Instance, tables: dict[str, str], report: Report, label: str = ON
) -> None:
    """``label`` ON_DTS: the Durable Task Scheduler, whose task hub has no Instances table;
    NO_SAMPLE: no sample app, so no status queue to peek."""
    held = _deployer_roles(on, tables)
    storage_hub = label != ON_DTS
    sample_app = label != NO_SAMPLE
    for assignment, role, scope in held:
        if not sample_app and scope.startswith(policy.STATUS_QUEUE_PREFIX):
            continue  # _check_sample_app_off names it
        if not _allowed(role, scope) or (scope in policy.TASK_HUB_TABLES and not storage_hub):
            report.add(
                assignment.file.rel,
                assignment.line,
                f"{label} role assignment '{assignment.symbol}' grants the deployer "
                f"{ROLE_NAMES.get(role, role)} at {scope}: broader than `python -m ops` needs",
                "grant only harness/tools/iac/policy.py OPERATOR_ROLES, each scoped to its entity",
            )
    line = main.file.line_of(f"param {policy.OPERATOR_ROLES_PARAM} ")
    for role, (scopes, why) in policy.OPERATOR_ROLES.items():
        for scope in sorted(scopes):
            if (scope in policy.TASK_HUB_TABLES and not storage_hub) or (
                scope.startswith(policy.STATUS_QUEUE_PREFIX) and not sample_app
            ):
                continue
            if not any(r == role and _covers(scope, s) for _, r, s in held):
                report.add(
                    main.file.rel,
                    line,
                    f"{label} the deployer holds no {ROLE_NAMES[role]} at {scope}: {why}",
                    "grant it, scoped to that entity (modules/operator-rbac.bicep)",
                )


def _check_deployer_off(off: Deployment, tables: dict[str, str], report: Report) -> None:
    for assignment, role, scope in _deployer_roles(off, tables):
        report.add(
            assignment.file.rel,
            assignment.line,
            f"{OFF} role assignment '{assignment.symbol}' grants the deployer "
            f"{ROLE_NAMES.get(role, role)} at {scope} with grantDeployerOperatorRoles off",
            "deploy the deployer's roles only if (grantDeployerOperatorRoles)",
        )


# --- the sample app ------------------------------------------------------------------------------


def _sample_app_name(main: Instance) -> str | None:
    declared: dict[str, Any] = main.file.section("parameters")
    default = (declared.get(policy.SAMPLE_APP_NAME_PARAM) or {}).get("default")
    return default if isinstance(default, str) else None


def _check_sample_app_on(on: Deployment, main: Instance, sample: str | None, report: Report) -> None:
    queue = f"{policy.STATUS_QUEUE_PREFIX}{sample}"
    if sample is not None and queue not in cross_checks.bicep_queues(on, Report()):
        report.add(
            main.file.rel,
            main.file.line_of(f"param {policy.SAMPLE_APP_PARAM} "),
            f"{ON} the sample app's queue '{queue}' is not deployed: `ops smoke` has nothing to read",
            f"add the sample app ({policy.SAMPLE_APP_NAME_PARAM}) to the registered apps when "
            f"{policy.SAMPLE_APP_PARAM} is on",
        )


def _check_sample_app_off(deployment: Deployment, sample: str | None, label: str, report: Report) -> None:
    """With the sample app off, nothing of it: no status queue, no role on one."""
    if sample is None:
        return
    queue = f"{policy.STATUS_QUEUE_PREFIX}{sample}"
    found = cross_checks.bicep_queues(deployment, Report()).get(queue)
    if found is not None:
        report.add(
            found.file,
            found.line,
            f"{label} the sample app's queue '{queue}' is deployed with {policy.SAMPLE_APP_PARAM} off",
            f"register the sample app only if ({policy.SAMPLE_APP_PARAM}), never in submittingApps",
        )
    for assignment in deployment.resources(*ROLE_TYPES):
        where = isolation.scope_of(assignment)
        if assignment.deployed is False or where.kind != "queue" or where.name != queue:
            continue
        role = isolation.role_of(assignment)
        report.add(
            assignment.file.rel,
            assignment.line,
            f"{label} role assignment '{assignment.symbol}' grants {ROLE_NAMES.get(role, role)} at "
            f"{queue} with {policy.SAMPLE_APP_PARAM} off: there is no sample app",
            f"grant it only if ({policy.SAMPLE_APP_PARAM}) (operator-rbac.bicep statusQueueName empty)",
        )


def _check_sample_app_parameters(root: Path, sample: str | None, report: Report) -> None:
    """main.parameters.json leaves the sample app to its switch, which follows the simulator's."""
    parameters, _ = parameters_json(root)
    entry = (parameters or {}).get(policy.SUBMITTING_APPS_PARAM)
    apps = entry.get("value") if isinstance(entry, dict) else None
    names = {a.get("name") for a in apps if isinstance(a, dict)} if isinstance(apps, list) else set()
    if sample is not None and sample in names:
        report.add(
            isolation.PARAMETERS,
            None,
            f"{policy.SUBMITTING_APPS_PARAM} lists the sample app '{sample}': "
            f"{policy.SAMPLE_APP_PARAM} off could not leave it out",
            f"remove it: main.bicep adds it when {policy.SAMPLE_APP_PARAM} is on",
        )
    switch = (parameters or {}).get(policy.SAMPLE_APP_PARAM)
    value = switch.get("value") if isinstance(switch, dict) else None
    if value != policy.SAMPLE_APP_VALUE:
        report.add(
            isolation.PARAMETERS,
            None,
            f"{policy.SAMPLE_APP_PARAM} is {json.dumps(value)}: not defaulted to the simulator's "
            "variable, so turning the simulator off for production would keep the sample app",
            f'set it to {{"value": "{policy.SAMPLE_APP_VALUE}"}}',
        )
