"""The Durable backend (``durableBackend``): with the Durable Task Scheduler, everything the app
needs to reach it; with Azure Storage, none of it.

With ``durableTaskScheduler``:

- a scheduler and a task hub are deployed; the scheduler's ``ipAllowlist`` is a non-empty list
  (an empty one denies every caller: the app's gRPC calls get 403 whatever its roles);
- the Function App's identity holds Durable Task Data Contributor on the task hub (or its
  scheduler): without it, 403 PermissionDenied;
- the Function App's settings switch host.json's provider to ``azureManaged``, name a connection
  setting that is identity-based (``Endpoint=...;Authentication=ManagedIdentity;ClientID=...``),
  use the task hub's name as the hub name, and select the preview extension bundle.

With ``azureStorage``: no scheduler, and no setting that moves the provider or the bundle.
"""

from typing import Any

from harness.tools.iac import cross_checks, policy
from harness.tools.iac.bicep import Resource, ResourceRef, Unknown, shown
from harness.tools.iac.infra_rules import Deployment
from harness.tools.iac.problems import Report

SCHEDULER = "Microsoft.DurableTask/schedulers"
TASK_HUB = "Microsoft.DurableTask/schedulers/taskHubs"
ROLE_ASSIGNMENT = "Microsoft.Authorization/roleAssignments"
MODULE = "infra/modules/dts.bicep"

Origin = tuple[tuple[str, ...], str]


def deployed(deployment: Deployment, *types: str) -> list[Resource]:
    return [r for r in deployment.resources(*types) if r.deployed is True]


def check(deployment: Deployment, backend: str, report: Report) -> None:
    schedulers = deployed(deployment, SCHEDULER)
    apps = cross_checks.function_apps(deployment, Report())
    if backend != policy.DURABLE_TASK_SCHEDULER:
        for scheduler in schedulers:
            report.add(
                scheduler.file.rel,
                scheduler.line,
                f"a Durable Task Scheduler '{scheduler.symbol}' is deployed with durableBackend {backend}",
                "deploy it only when durableBackend is durableTaskScheduler (if (...))",
            )
        for app in apps:
            for name in (policy.DTS_PROVIDER_TYPE_SETTING, policy.BUNDLE_ID_SETTING):
                if name in app.values:
                    report.add(
                        app.file,
                        app.lines.get(name),
                        f"{app.label} sets {name} with durableBackend {backend}",
                        "set it only for the Durable Task Scheduler: host.json is the Azure Storage setup",
                    )
        return
    hubs = deployed(deployment, TASK_HUB)
    if not schedulers or not hubs:
        report.add(
            "infra/main.bicep",
            None,
            "durableBackend durableTaskScheduler deploys no Durable Task Scheduler and task hub",
            f"deploy {MODULE} when durableBackend is durableTaskScheduler",
        )
        return
    for scheduler in schedulers:
        _check_allowlist(scheduler, report)
    identities = _app_identities(deployment)
    if not any(_grants(a, identities) for a in deployed(deployment, ROLE_ASSIGNMENT)):
        report.add(
            hubs[0].file.rel,
            hubs[0].line,
            "the Function App's identity holds no Durable Task Data Contributor on the task hub: its "
            "gRPC calls get 403 PermissionDenied",
            f"assign role {policy.DURABLE_TASK_DATA_CONTRIBUTOR} to the app's identity, scoped to the task "
            "hub (principalType ServicePrincipal)",
        )
    hub_names = {h.name for h in hubs if isinstance(h.name, str)}
    for app in apps:
        _check_settings(app, hub_names, report)


def _check_allowlist(scheduler: Resource, report: Report) -> None:
    allowlist = scheduler.get("properties", "ipAllowlist")
    line = scheduler.file.line_of("ipAllowlist", scheduler.line, scheduler.end_line) or scheduler.line
    if isinstance(allowlist, list) and allowlist:
        return
    if isinstance(allowlist, Unknown):
        shown = f"unknown offline ({allowlist.why})"
    elif allowlist is None:
        shown = "not set"
    else:
        shown = "empty"
    report.add(
        scheduler.file.rel,
        line,
        f"Durable Task Scheduler '{scheduler.symbol}': ipAllowlist is {shown}, which admits no caller "
        "(403 on every gRPC call)",
        "admit the app: ['0.0.0.0/0'] (a Flex Consumption app has no fixed outbound address; access "
        "stays Entra ID only)",
    )


def _app_identities(deployment: Deployment) -> set[Origin]:
    found: set[Origin] = set()
    for instance in deployment.instances:
        for site in (r for r in instance.all_resources() if cross_checks.is_function_app(r)):
            identities = site.get("identity", "userAssignedIdentities")
            for key in identities if isinstance(identities, dict) else {}:
                if key.startswith("${") and key.endswith("}"):
                    value = instance.eval_path(key[2:-1].strip(), {})
                    if isinstance(value, Unknown) and value.origin is not None:
                        found.add(value.origin)
    return found


def _grants(assignment: Resource, identities: set[Origin]) -> bool:
    role = assignment.get("properties", "roleDefinitionId")
    text = role if isinstance(role, str) else role.partial if isinstance(role, Unknown) else ""
    principal = assignment.get("properties", "principalId")
    scope = assignment.get("scope")
    scoped = False
    if isinstance(scope, ResourceRef):
        targets = scope.instance.resources(scope.symbol)
        scoped = len(targets) == 1 and targets[0].type.lower() in (SCHEDULER.lower(), TASK_HUB.lower())
    return (
        text.lower().endswith(policy.DURABLE_TASK_DATA_CONTRIBUTOR)
        and isinstance(principal, Unknown)
        and principal.origin in identities
        and scoped
    )


def _check_settings(app: cross_checks.Target, hub_names: set[Any], report: Report) -> None:
    def problem(name: str, what: str, fix: str) -> None:
        report.add(app.file, app.lines.get(name) or app.line, f"{app.label}: {what}", fix)

    values = app.values
    kind = values.get(policy.DTS_PROVIDER_TYPE_SETTING)
    if kind != policy.DTS_PROVIDER_TYPE:
        problem(
            policy.DTS_PROVIDER_TYPE_SETTING,
            f"{policy.DTS_PROVIDER_TYPE_SETTING} is {shown(kind)}, so the host stays on Azure Storage",
            f"set it to '{policy.DTS_PROVIDER_TYPE}' with durableBackend durableTaskScheduler",
        )
    connection_name = values.get(policy.DTS_CONNECTION_NAME_SETTING)
    connection = values.get(connection_name) if isinstance(connection_name, str) else None
    text = connection if isinstance(connection, str) else getattr(connection, "partial", "")
    missing = [part for part in policy.DTS_CONNECTION_PARTS if part not in text]
    if missing or not isinstance(connection_name, str):
        problem(
            policy.DTS_CONNECTION_NAME_SETTING,
            f"the Durable Task Scheduler connection ({shown(connection_name)}) is not identity-based "
            f"(lacks {', '.join(missing) or 'a setting'})",
            "name a setting holding 'Endpoint=<scheduler endpoint>;Authentication=ManagedIdentity;"
            "ClientID=<the identity's client ID>'",
        )
    hub = values.get(policy.DTS_HUB_NAME_SETTING)
    if hub not in hub_names:
        problem(
            policy.DTS_HUB_NAME_SETTING,
            f"{policy.DTS_HUB_NAME_SETTING} is {shown(hub)}, not a deployed task hub "
            f"({', '.join(sorted(map(str, hub_names)))})",
            "set it to the task hub's name",
        )
    bundle = values.get(policy.BUNDLE_ID_SETTING)
    if bundle != policy.DTS_BUNDLE_ID:
        problem(
            policy.BUNDLE_ID_SETTING,
            f"{policy.BUNDLE_ID_SETTING} is {shown(bundle)}: a Python app gets the azureManaged "
            "provider from the preview bundle",
            f"set it to '{policy.DTS_BUNDLE_ID}' (and its version range)",
        )
