"""Audit logs (harness/tools/iac/diagnostics.py): every data service and the Function App sends its logs
to the workspace and SQL auditing is on, in every combination of the options; removing one, in a
copy of the repository, fails `make iac` naming what lost its trail. Fixtures: tests/iac/conftest.py."""

from pathlib import Path

import pytest

from tests.support.iac import assert_fails, delete_resource, edit, needs_bicep

pytestmark = needs_bicep


def module(root: Path, name: str) -> Path:
    return root / "infra" / "modules" / f"{name}.bicep"


@pytest.mark.parametrize(
    ("name", "symbol", "resource"),
    [
        ("servicebus", "diagnostics", "Microsoft.ServiceBus/namespaces 'namespace'"),
        ("cosmos", "diagnostics", "Microsoft.DocumentDB/databaseAccounts 'account'"),
        ("storage", "queueDiagnostics", "Microsoft.Storage/storageAccounts/queueServices 'queueService'"),
        ("sql", "diagnostics", "Microsoft.Sql/servers/databases 'database'"),
        ("functionapp", "diagnostics", "Microsoft.Web/sites 'app'"),
    ],
)
def test_a_service_without_its_diagnostic_setting_fails(
    root: Path, clean: Path, name: str, symbol: str, resource: str
) -> None:
    delete_resource(module(root, name), symbol)
    assert_fails(root, resource, "sends no logs to the Log Analytics workspace", clean=clean)


def test_a_setting_with_its_logs_disabled_fails(root: Path, clean: Path) -> None:
    edit(module(root, "cosmos"), "        enabled: true", "        enabled: false")
    assert_fails(root, "Microsoft.DocumentDB/databaseAccounts 'account'", "sends no logs", clean=clean)


def test_a_storage_account_without_its_queue_service_fails(root: Path, clean: Path) -> None:
    path = module(root, "storage")
    delete_resource(path, "queueDiagnostics")
    delete_resource(path, "queueService")
    assert_fails(root, "storage account 'storage' declares no queueServices", clean=clean)


def test_sql_auditing_off_fails(root: Path, clean: Path) -> None:
    edit(
        module(root, "sql"), "    isAzureMonitorTargetEnabled: true", "    isAzureMonitorTargetEnabled: false"
    )
    assert_fails(root, "SQL server 'server' has no auditing to Azure Monitor", clean=clean)


def test_sql_audit_events_sent_nowhere_fail(root: Path, clean: Path) -> None:
    edit(module(root, "sql"), "category: 'SQLSecurityAuditEvents'", "category: 'Errors'")
    assert_fails(root, "SQL server 'server': its audit events reach no workspace", clean=clean)


def test_a_setting_left_out_in_one_combination_names_it(root: Path, clean: Path) -> None:
    path = module(root, "servicebus")
    edit(
        path,
        "resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {",
        "resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = if (!premium) {",
    )
    assert_fails(
        root, "networkIsolation=true]", "Microsoft.ServiceBus/namespaces", "sends no logs", clean=clean
    )


def test_the_durable_task_scheduler_without_its_setting_fails(root: Path, clean: Path) -> None:
    delete_resource(module(root, "dts"), "diagnostics")
    assert_fails(
        root,
        "[durableBackend=durableTaskScheduler",
        "Microsoft.DurableTask/schedulers 'scheduler'",
        "sends no logs to the Log Analytics workspace",
        clean=clean,
    )
