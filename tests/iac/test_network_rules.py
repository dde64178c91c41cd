"""The default network mode (tools/iac/network.py ``check_default``): with networkIsolation off,
Cosmos DB, the compensation log's storage account and SQL admit only the subnets the app and the
agent run in, over their service endpoints, and no address written in the Bicep. Each test breaks
one rule in a copy of the repository and expects `make iac` to fail naming it and the combination.
Fixtures: tests/iac/conftest.py."""

from pathlib import Path

from tests.support.iac import assert_fails, delete_resource, edit, needs_bicep

pytestmark = needs_bicep

DEFAULT_MODE = "networkIsolation=false]"


def module(root: Path, name: str) -> Path:
    return root / "infra" / "modules" / f"{name}.bicep"


def test_cosmos_without_its_virtual_network_filter_fails(root: Path, clean: Path) -> None:
    edit(
        module(root, "cosmos"),
        "isVirtualNetworkFilterEnabled: filtered",
        "isVirtualNetworkFilterEnabled: false",
    )
    assert_fails(
        root,
        DEFAULT_MODE,
        "Microsoft.DocumentDB/databaseAccounts 'account'",
        "admits every network",
        clean=clean,
    )


def test_the_compensation_log_open_to_every_network_fails(root: Path, clean: Path) -> None:
    edit(root / "infra" / "main.bicep", "    allowAllNetworks: false\n", "    allowAllNetworks: true\n")
    assert_fails(root, DEFAULT_MODE, "(module dataStorage)", "admits every network", clean=clean)


def test_a_subnet_without_the_services_endpoint_fails(root: Path, clean: Path) -> None:
    edit(
        module(root, "network"),
        "            {\n              service: 'Microsoft.Storage'\n            }\n",
        "",
    )
    assert_fails(
        root,
        DEFAULT_MODE,
        "(module dataStorage)",
        "carries no Microsoft.Storage service endpoint",
        clean=clean,
    )


def test_a_subnet_no_workload_runs_in_fails(root: Path, clean: Path) -> None:
    edit(
        root / "infra" / "main.bicep",
        "var appSubnets = [\n  network.outputs.appSubnetId\n]",
        "var appSubnets = [\n  network.outputs.endpointsSubnetId\n]",
    )
    assert_fails(root, DEFAULT_MODE, "admits subnet endpoints, which neither the Function App", clean=clean)


def test_an_address_written_in_the_bicep_fails(root: Path, clean: Path) -> None:
    edit(
        root / "infra" / "main.bicep",
        "var operatorAddresses = empty(operatorIpAddress) ? [] : [\n  operatorIpAddress\n]",
        "var operatorAddresses = [\n  '0.0.0.0'\n]",
    )
    assert_fails(
        root,
        DEFAULT_MODE,
        "Microsoft.DocumentDB/databaseAccounts 'account'",
        "admits the address '0.0.0.0' written in the Bicep (every Azure datacenter",
        clean=clean,
    )


def test_a_rule_that_ignores_a_missing_endpoint_fails(root: Path, clean: Path) -> None:
    edit(
        module(root, "cosmos"),
        "ignoreMissingVNetServiceEndpoint: false",
        "ignoreMissingVNetServiceEndpoint: true",
    )
    assert_fails(root, DEFAULT_MODE, "ignores a missing service endpoint on subnet app", clean=clean)


def test_sql_without_its_subnet_rule_fails(root: Path, clean: Path) -> None:
    delete_resource(module(root, "sql"), "appSubnetRule")
    assert_fails(
        root,
        DEFAULT_MODE,
        "Microsoft.Sql/servers 'server'",
        "admits no subnet, so the app cannot reach it",
        clean=clean,
    )
