"""The default network mode (harness/tools/iac/network.py ``check_default``): with networkIsolation off,
Cosmos DB, the compensation log's storage account and SQL admit only the subnets the app and the
agent run in, over their service endpoints, and no address written in the Bicep. Each case breaks
one rule in a copy of the repository and expects `make iac` to fail naming it and the combination.
Fixtures: tests/iac/conftest.py."""

from pathlib import Path

import pytest

from tests.support.iac import assert_fails, delete_resource, edit, needs_bicep

pytestmark = needs_bicep

DEFAULT_MODE = "networkIsolation=false]"
COSMOS = "Microsoft.DocumentDB/databaseAccounts 'account'"

# (the file under infra/, the text replaced, its replacement, what the new problem names)
BREAKS = {
    "cosmos filter off": (
        "modules/cosmos.bicep",
        "isVirtualNetworkFilterEnabled: filtered",
        "isVirtualNetworkFilterEnabled: false",
        (COSMOS, "admits every network"),
    ),
    "compensation log open": (
        "main.bicep",
        "    allowAllNetworks: false\n",
        "    allowAllNetworks: true\n",
        ("(module dataStorage)", "admits every network"),
    ),
    "no storage service endpoint": (
        "modules/network.bicep",
        "            {\n              service: 'Microsoft.Storage'\n            }\n",
        "",
        ("(module dataStorage)", "carries no Microsoft.Storage service endpoint"),
    ),
    "a subnet no workload runs in": (
        "main.bicep",
        "var appSubnets = [\n  network.outputs.appSubnetId\n]",
        "var appSubnets = [\n  network.outputs.endpointsSubnetId\n]",
        ("admits subnet endpoints, which neither the Function App",),
    ),
    "an address in the bicep": (
        "main.bicep",
        "var operatorAddresses = empty(operatorIpAddress) ? [] : [\n  operatorIpAddress\n]",
        "var operatorAddresses = [\n  '0.0.0.0'\n]",
        (COSMOS, "admits the address '0.0.0.0' written in the Bicep (every Azure datacenter"),
    ),
    "a missing endpoint ignored": (
        "modules/cosmos.bicep",
        "ignoreMissingVNetServiceEndpoint: false",
        "ignoreMissingVNetServiceEndpoint: true",
        ("ignores a missing service endpoint on subnet app",),
    ),
}


@pytest.mark.parametrize("case", list(BREAKS))
def test_a_broken_network_rule_fails(root: Path, clean: Path, case: str) -> None:
    path, old, new, needles = BREAKS[case]
    edit(root / "infra" / path, old, new)
    assert_fails(root, DEFAULT_MODE, *needles, clean=clean)


def test_sql_without_its_subnet_rule_fails(root: Path, clean: Path) -> None:
    delete_resource(root / "infra" / "modules" / "sql.bicep", "appSubnetRule")
    assert_fails(
        root,
        DEFAULT_MODE,
        "Microsoft.Sql/servers 'server'",
        "admits no subnet, so the app cannot reach it",
        clean=clean,
    )
