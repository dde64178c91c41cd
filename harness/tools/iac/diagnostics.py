"""Audit logs: every data service and the Function App sends its logs to the Log Analytics
workspace, in every combination of the deployment options (``variants``).

- each deployed resource of ``DIAGNOSED`` is the ``scope`` of a deployed
  ``Microsoft.Insights/diagnosticSettings`` with a ``workspaceId`` and at least one enabled log
  (a category or the ``allLogs``/``audit`` category group);
- each storage account has its blob, queue and table services declared, so each has a setting
  (the account itself takes metrics only, not logs);
- each SQL server has auditing on to Azure Monitor (``auditingSettings``: ``state 'Enabled'``,
  ``isAzureMonitorTargetEnabled``) and a setting on its ``master`` database with the
  ``SQLSecurityAuditEvents`` category, where Azure Monitor receives the server's audit events.

Sources: Azure Monitor "Supported logs" per resource type (Microsoft.DurableTask/schedulers
among them: "Durable Task Scheduler Logs") and the Bicep reference of
Microsoft.Insights/diagnosticSettings (2021-05-01-preview: categoryGroup), and "Set up auditing
for Azure SQL Database" (auditing to Log Analytics through the master database's setting):
https://learn.microsoft.com/azure/azure-monitor/reference/logs-index,
https://learn.microsoft.com/azure/azure-monitor/reference/supported-logs/microsoft-durabletask-schedulers-logs,
https://learn.microsoft.com/azure/templates/microsoft.insights/diagnosticsettings,
https://learn.microsoft.com/azure/azure-sql/database/auditing-setup.
"""

from harness.tools.iac.bicep import Instance, Resource, ResourceRef
from harness.tools.iac.infra_rules import Deployment
from harness.tools.iac.problems import Report

DIAGNOSTIC_SETTINGS = "Microsoft.Insights/diagnosticSettings"
DIAGNOSED = (
    "Microsoft.ServiceBus/namespaces",
    "Microsoft.DocumentDB/databaseAccounts",
    "Microsoft.Storage/storageAccounts/blobServices",
    "Microsoft.Storage/storageAccounts/queueServices",
    "Microsoft.Storage/storageAccounts/tableServices",
    "Microsoft.Sql/servers/databases",
    "Microsoft.Web/sites",
    "Microsoft.App/managedEnvironments",
    "Microsoft.DurableTask/schedulers",
)
STORAGE_SERVICES = DIAGNOSED[2:5]
SQL_AUDIT_CATEGORY = "SQLSecurityAuditEvents"

Key = tuple[tuple[str, ...], str]


def _is(resource: Resource, kind: str) -> bool:
    return resource.type.lower() == kind.lower()


def _all(deployment: Deployment) -> list[tuple[Instance, Resource]]:
    return [
        (instance, resource)
        for instance in deployment.instances
        for resource in instance.all_resources()
        if resource.deployed is True
    ]


def _enabled_logs(setting: Resource) -> set[str]:
    logs = setting.get("properties", "logs")
    found: set[str] = set()
    for log in logs if isinstance(logs, list) else []:
        if isinstance(log, dict) and log.get("enabled") is True:
            name = log.get("category") or log.get("categoryGroup")
            if isinstance(name, str):
                found.add(name)
    return found


def _settings(resources: list[tuple[Instance, Resource]]) -> dict[Key, set[str]]:
    """The enabled logs sent to a workspace, by the resource each setting is scoped to."""
    found: dict[Key, set[str]] = {}
    for _, setting in resources:
        if not _is(setting, DIAGNOSTIC_SETTINGS) or setting.existing:
            continue
        scope = setting.get("scope")
        workspace = setting.get("properties", "workspaceId")
        if isinstance(scope, ResourceRef) and workspace:
            found.setdefault((scope.instance.path, scope.symbol), set()).update(_enabled_logs(setting))
    return found


def check(deployment: Deployment, report: Report) -> None:
    resources = _all(deployment)
    settings = _settings(resources)
    for instance, resource in resources:
        if resource.existing:
            continue
        label = f"{resource.type} '{resource.symbol}'"
        if any(_is(resource, kind) for kind in DIAGNOSED) and not settings.get(
            (instance.path, resource.symbol)
        ):
            report.add(
                resource.file.rel,
                resource.line,
                f"{label} sends no logs to the Log Analytics workspace: no audit trail",
                f"add a {DIAGNOSTIC_SETTINGS} scoped to it with workspaceId and categoryGroup 'allLogs'",
            )
        if _is(resource, "Microsoft.Storage/storageAccounts"):
            _check_storage_services(instance, resource, resources, report)
        if _is(resource, "Microsoft.Sql/servers"):
            _check_sql_auditing(instance, resource, resources, settings, report)


def _children(
    instance: Instance, parent: Resource, resources: list[tuple[Instance, Resource]]
) -> list[Resource]:
    out: list[Resource] = []
    for owner, child in resources:
        ref = child.get("parent")
        if owner is instance and isinstance(ref, ResourceRef) and ref.symbol == parent.symbol:
            out.append(child)
    return out


def _check_storage_services(
    instance: Instance, account: Resource, resources: list[tuple[Instance, Resource]], report: Report
) -> None:
    present = {child.type.lower() for child in _children(instance, account, resources)}
    for kind in STORAGE_SERVICES:
        if kind.lower() not in present:
            report.add(
                account.file.rel,
                account.line,
                f"storage account '{account.symbol}' declares no {kind.rsplit('/', 1)[1]} 'default', so "
                "that service's reads and writes are logged nowhere",
                "declare it (parent: the account, name: 'default') with a diagnostic setting",
            )


def _check_sql_auditing(
    instance: Instance,
    server: Resource,
    resources: list[tuple[Instance, Resource]],
    settings: dict[Key, set[str]],
    report: Report,
) -> None:
    children = _children(instance, server, resources)
    auditing = [c for c in children if _is(c, "Microsoft.Sql/servers/auditingSettings")]
    on = any(
        a.get("properties", "state") == "Enabled"
        and a.get("properties", "isAzureMonitorTargetEnabled") is True
        for a in auditing
    )
    if not on:
        report.add(
            server.file.rel,
            server.line,
            f"SQL server '{server.symbol}' has no auditing to Azure Monitor",
            "add Microsoft.Sql/servers/auditingSettings 'default' with state 'Enabled' and "
            "isAzureMonitorTargetEnabled: true",
        )
    # An existing resource's name is read from its declaration (the evaluator resolves it to a reference).
    masters = [
        c
        for c in children
        if _is(c, "Microsoft.Sql/servers/databases")
        and isinstance(c.raw, dict)
        and c.raw.get("name") == "master"
    ]
    if not any(SQL_AUDIT_CATEGORY in settings.get((instance.path, m.symbol), set()) for m in masters):
        report.add(
            server.file.rel,
            server.line,
            f"SQL server '{server.symbol}': its audit events reach no workspace (no diagnostic setting "
            f"with {SQL_AUDIT_CATEGORY} on its master database)",
            f"declare the master database (existing) with a diagnostic setting for {SQL_AUDIT_CATEGORY}",
        )
