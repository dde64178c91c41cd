"""The deployment options (durableBackend, networkIsolation): the project checker evaluates every
combination, and breaking what one combination needs — in a copy of the repository — fails,
naming the combination. The helpers are tests/support/iac.py's; the fixtures (``clean``, ``root``)
tests/iac/conftest.py's."""

import re
import subprocess
from pathlib import Path

from tests.support.iac import (
    BICEP_PYTHON,
    REPO,
    assert_fails,
    declaring,
    delete_resource,
    edit,
    function_app_file,
    needs_bicep,
)

DTS = "[durableBackend=durableTaskScheduler"
ISOLATED = "networkIsolation=true]"


def main_bicep(root: Path) -> Path:
    return root / "infra" / "main.bicep"


# --- the Durable Task Scheduler ------------------------------------------------------------------


@needs_bicep
def test_the_scheduler_without_the_apps_role_fails(root: Path, clean: Path) -> None:
    dts = declaring(root, "Microsoft.DurableTask/schedulers")
    symbol = re.search(r"^resource (\w+) 'Microsoft.Authorization/roleAssignments@", dts.read_text(), re.M)
    assert symbol, "the role assignment is no longer in the scheduler's module: update this test"
    delete_resource(dts, symbol.group(1))
    assert_fails(root, DTS, "no Durable Task Data Contributor on the task hub", clean=clean)


@needs_bicep
def test_the_scheduler_with_an_empty_allow_list_fails(root: Path, clean: Path) -> None:
    edit(main_bicep(root), "    ipAllowlist: [\n      '0.0.0.0/0'\n    ]", "    ipAllowlist: []")
    assert_fails(root, DTS, "ipAllowlist is empty", "admits no caller", clean=clean)


@needs_bicep
def test_the_scheduler_deployed_with_azure_storage_fails(root: Path, clean: Path) -> None:
    edit(main_bicep(root), "= if (useDurableTaskScheduler) {", "= {")
    assert_fails(
        root, "[durableBackend=azureStorage", "is deployed with durableBackend azureStorage", clean=clean
    )


@needs_bicep
def test_the_host_left_on_azure_storage_fails(root: Path, clean: Path) -> None:
    edit(
        function_app_file(root),
        "storageProvider__type: 'azureManaged'",
        "storageProvider__type: 'azureStorage'",
    )
    assert_fails(root, DTS, "so the host stays on Azure Storage", clean=clean)


@needs_bicep
def test_a_scheduler_connection_without_the_identity_fails(root: Path, clean: Path) -> None:
    edit(
        function_app_file(root),
        "Authentication=ManagedIdentity;ClientID=${identityClientId}",
        "Authentication=None",
    )
    assert_fails(root, DTS, "is not identity-based", "Authentication=ManagedIdentity", clean=clean)


@needs_bicep
def test_the_scheduler_without_the_preview_bundle_fails(root: Path, clean: Path) -> None:
    edit(
        function_app_file(root),
        "'Microsoft.Azure.Functions.ExtensionBundle.Preview'",
        "'Microsoft.Azure.Functions.ExtensionBundle'",
    )
    assert_fails(root, DTS, "extensionBundle__id", "preview bundle", clean=clean)


# --- the network ---------------------------------------------------------------------------------


@needs_bicep
def test_isolation_with_one_public_service_fails(root: Path, clean: Path) -> None:
    cosmos = declaring(root, "Microsoft.DocumentDB/databaseAccounts")
    edit(cosmos, "publicNetworkAccess: publicNetworkAccess", "publicNetworkAccess: 'Enabled'")
    assert_fails(
        root, ISOLATED, "Microsoft.DocumentDB/databaseAccounts", "is reachable publicly", clean=clean
    )


@needs_bicep
def test_isolation_without_a_private_endpoint_fails(root: Path, clean: Path) -> None:
    edit(main_bicep(root), "serviceId: cosmos.outputs.id", "serviceId: ''")
    assert_fails(
        root, ISOLATED, "Microsoft.DocumentDB/databaseAccounts", "has no private endpoint", clean=clean
    )


@needs_bicep
def test_isolation_on_standard_service_bus_fails(root: Path, clean: Path) -> None:
    edit(main_bicep(root), "premium: networkIsolation", "premium: false")
    assert_fails(
        root, ISOLATED, "Microsoft.ServiceBus/namespaces", "private endpoints need Premium", clean=clean
    )


@needs_bicep
def test_isolation_with_the_agent_outside_the_network_fails(root: Path, clean: Path) -> None:
    edit(
        main_bicep(root),
        "infrastructureSubnetId: network.outputs.agentSubnetId",
        "infrastructureSubnetId: ''",
    )
    assert_fails(root, ISOLATED, "Container Apps environment", "not in the virtual network", clean=clean)


@needs_bicep
def test_the_allow_all_azure_services_rule_fails_in_either_mode(root: Path, clean: Path) -> None:
    sql = declaring(root, "Microsoft.Sql/servers")
    sql.write_text(
        sql.read_text()
        + "\nresource allowAzure 'Microsoft.Sql/servers/firewallRules@2023-08-01' = {\n"
        + "  parent: server\n  name: 'AllowAllWindowsAzureIps'\n  properties: {\n"
        + "    startIpAddress: '0.0.0.0'\n    endIpAddress: '0.0.0.0'\n  }\n}\n"
    )
    # The default combination reports it as is; the others add nothing new for the same line.
    assert_fails(root, "allowAzure", "allows all Azure services", clean=clean)


@needs_bicep
def test_the_docs_list_of_public_endpoints_must_match_the_bicep(root: Path, clean: Path) -> None:
    docs = root / "docs" / "deploying.md"
    edit(docs, "| `Microsoft.DocumentDB/databaseAccounts`: Cosmos DB |", "| Cosmos DB |")
    assert_fails(
        root, "networkIsolation=false", "Microsoft.DocumentDB/databaseAccounts", "is not listed", clean=clean
    )
    edit(
        docs,
        "<!-- public-endpoints networkIsolation=true -->\n",
        "<!-- public-endpoints networkIsolation=true -->\n| `Microsoft.Sql/servers` | no | no |\n",
    )
    assert_fails(
        root, "networkIsolation=true", "Microsoft.Sql/servers", "has no public endpoint", clean=clean
    )


# --- checkov sees each combination ---------------------------------------------------------------


@needs_bicep
def test_each_combination_is_rendered_with_its_own_values(tmp_path: Path) -> None:
    """checkov evaluates no parameters: the rendered copies it scans hold each combination's values."""
    completed = subprocess.run(
        [str(BICEP_PYTHON), "-m", "harness.tools.iac.render", str(REPO), str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    for isolated, access, sku in (("false", "Enabled", "Standard"), ("true", "Disabled", "Premium")):
        for backend in ("azureStorage", "durableTaskScheduler"):
            folder = tmp_path / f"{backend}-isolation-{isolated}"
            assert f"publicNetworkAccess: '{access}'" in (folder / "cosmos.bicep").read_text()
            assert f"name: '{sku}'" in (folder / "serviceBus.bicep").read_text()
            scheduler = folder / "durableTask.bicep"
            assert scheduler.exists() is (backend == "durableTaskScheduler"), scheduler
