"""The network (``networkIsolation``): which services are reachable from the internet.

In every combination:

- no SQL firewall rule admits all Azure services (``0.0.0.0``-``0.0.0.0``): it admits every
  Azure customer's resources, not this app's;
- the resources with a public endpoint (``policy.PUBLIC_ACCESS_PROPERTY``: public network access
  not ``'Disabled'``) are exactly those ``docs/deploying.md`` lists for that mode, between
  ``<!-- public-endpoints networkIsolation=false|true -->`` and ``<!-- /public-endpoints -->``
  (``check_docs``).

With ``networkIsolation`` off (``check_default``), each data service whose tier takes network
rules (``policy.SUBNET_RESTRICTED``: Cosmos DB, storage, SQL), unless ``policy.OPEN_BY_DEFAULT``
names it with its reason:

- admits networks it lists only: Cosmos DB's virtual network filter on, storage's default action
  ``Deny``, SQL by its ``virtualNetworkRules`` children;
- admits at least one subnet, and only the subnets the Function App and the agent's environment
  run in, each carrying that service's endpoint (``ignoreMissingVnetServiceEndpoint`` not true);
- admits no address written in the Bicep (the operator's comes from a parameter) and never
  ``0.0.0.0``, which Cosmos DB reads as every Azure datacenter.

With ``networkIsolation`` on:

- every data service (``policy.DATA_SERVICES``) has ``publicNetworkAccess: 'Disabled'`` and a
  deployed private endpoint, with the SKU private endpoints need (Service Bus Premium);
- the Function App is integrated into a subnet and the agent's Container Apps environment is in
  the virtual network.
"""

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from harness.tools.iac import policy
from harness.tools.iac.bicep import Instance, Resource, Unknown, shown
from harness.tools.iac.infra_rules import Deployment
from harness.tools.iac.problems import Report

PRIVATE_ENDPOINT = "Microsoft.Network/privateEndpoints"
SQL_FIREWALL_RULE = "Microsoft.Sql/servers/firewallRules"
DOC_LIST = re.compile(
    r"<!-- public-endpoints networkIsolation=(true|false) -->(.*?)<!-- /public-endpoints -->", re.S
)
# A list item or a table row that starts with the resource type.
DOC_ITEM = re.compile(r"^\s*(?:[-*]|\|)\s*`(Microsoft\.[A-Za-z]+/[A-Za-z/]+)`", re.M)

Origin = tuple[tuple[str, ...], str]


class HasIsolation(Protocol):
    @property
    def network_isolation(self) -> bool: ...


def _deployed(deployment: Deployment) -> list[tuple[Instance, Resource]]:
    return [
        (instance, resource)
        for instance in deployment.instances
        for resource in instance.all_resources()
        if resource.deployed is True and not resource.existing
    ]


def _is(resource: Resource, kind: str) -> bool:
    return resource.type.lower() == kind.lower()


def _public(resource: Resource) -> bool:
    """Whether its public endpoint is on: anything but a literal 'Disabled' (Azure's default is on)."""
    prop = next((p for t, p in policy.PUBLIC_ACCESS_PROPERTY.items() if _is(resource, t)), None)
    return prop is not None and resource.get("properties", prop) != "Disabled"


def public_types(deployment: Deployment) -> set[str]:
    return {
        next(t for t in policy.PUBLIC_ACCESS_PROPERTY if _is(r, t))
        for _, r in _deployed(deployment)
        if _public(r)
    }


def _endpoint_targets(deployment: Deployment) -> set[Origin]:
    found: set[Origin] = set()
    for _, endpoint in _deployed(deployment):
        if not _is(endpoint, PRIVATE_ENDPOINT):
            continue
        connections = endpoint.get("properties", "privateLinkServiceConnections")
        for connection in connections if isinstance(connections, list) else []:
            target = (
                connection.get("properties", {}).get("privateLinkServiceId")
                if isinstance(connection, dict)
                else None
            )
            if isinstance(target, Unknown) and target.origin is not None:
                found.add(target.origin)
    return found


def check(deployment: Deployment, isolated: bool, report: Report) -> None:
    resources = _deployed(deployment)
    _check_firewall(resources, report)
    if isolated:
        _check_isolated(deployment, resources, report)
    else:
        check_default(resources, report)


SUBNET_NAME = re.compile(r"/subnets/([A-Za-z0-9_.-]+)")


def _subnet(value: object) -> str | None:
    """A subnet ID's subnet name, known offline even when the network's own ID is not."""
    text = value if isinstance(value, str) else (value.why if isinstance(value, Unknown) else "")
    match = SUBNET_NAME.search(text)
    return match.group(1) if match else None


def _workload_subnets(resources: list[tuple[Instance, Resource]]) -> set[str]:
    """The subnets the Function App and the agent's Container Apps environment run in."""
    found: set[str | None] = set()
    for _, resource in resources:
        if _is(resource, "Microsoft.Web/sites"):
            found.add(_subnet(resource.get("properties", "virtualNetworkSubnetId")))
        if _is(resource, "Microsoft.App/managedEnvironments"):
            found.add(_subnet(resource.get("properties", "vnetConfiguration", "infrastructureSubnetId")))
    return {name for name in found if name}


def _service_endpoints(resources: list[tuple[Instance, Resource]]) -> dict[str, set[str]]:
    """Each subnet's service endpoints, by subnet name."""
    found: dict[str, set[str]] = {}
    for _, network in resources:
        subnets = (
            network.get("properties", "subnets")
            if _is(network, "Microsoft.Network/virtualNetworks")
            else None
        )
        for subnet in subnets if isinstance(subnets, list) else []:
            if not isinstance(subnet, dict) or not isinstance(subnet.get("name"), str):
                continue
            endpoints = (subnet.get("properties") or {}).get("serviceEndpoints")
            found[subnet["name"]] = {
                e["service"]
                for e in (endpoints if isinstance(endpoints, list) else [])
                if isinstance(e, dict) and isinstance(e.get("service"), str)
            }
    return found


def _rules(
    instance: Instance, resource: Resource, resources: list[tuple[Instance, Resource]]
) -> tuple[bool, list[tuple[object, object]], list[object]]:
    """Whether it admits only what it lists; its (subnet ID, ignore a missing endpoint) rules; its
    addresses."""
    if _is(resource, "Microsoft.DocumentDB/databaseAccounts"):
        subnets = resource.get("properties", "virtualNetworkRules")
        addresses = resource.get("properties", "ipRules")
        return (
            resource.get("properties", "isVirtualNetworkFilterEnabled") is True,
            [(r.get("id"), r.get("ignoreMissingVNetServiceEndpoint")) for r in _dicts(subnets)],
            [r.get("ipAddressOrRange") for r in _dicts(addresses)],
        )
    if _is(resource, "Microsoft.Storage/storageAccounts"):
        acls = resource.get("properties", "networkAcls")
        acls = acls if isinstance(acls, dict) else {}
        return (
            acls.get("defaultAction") == "Deny",
            [(r.get("id"), None) for r in _dicts(acls.get("virtualNetworkRules"))],
            [r.get("value") for r in _dicts(acls.get("ipRules"))],
        )
    children = [
        child
        for owner, child in resources
        if owner is instance
        and _is(child, "Microsoft.Sql/servers/virtualNetworkRules")
        and getattr(child.get("parent"), "symbol", None) == resource.symbol
    ]
    return (
        True,
        [
            (
                c.get("properties", "virtualNetworkSubnetId"),
                c.get("properties", "ignoreMissingVnetServiceEndpoint"),
            )
            for c in children
        ],
        [],
    )


def _dicts(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def check_default(resources: list[tuple[Instance, Resource]], report: Report) -> None:
    """networkIsolation off: the data services that take network rules admit the workloads' subnets only."""
    workloads = _workload_subnets(resources)
    endpoints = _service_endpoints(resources)
    for instance, resource in resources:
        service = next((t for t in policy.SUBNET_RESTRICTED if _is(resource, t)), None)
        if service is None or instance.path in policy.OPEN_BY_DEFAULT:
            continue
        if resource.get("properties", "publicNetworkAccess") == "Disabled":
            continue
        label = (
            f"with networkIsolation off, {resource.type} '{resource.symbol}' (module "
            f"{' > '.join(instance.path) or 'main'})"
        )
        where = (resource.file.rel, resource.line)
        listed_only, subnets, addresses = _rules(instance, resource, resources)
        if not listed_only:
            report.add(
                *where,
                f"{label} admits every network",
                "deny by default and admit the app's subnet (virtual network rule, service endpoint)",
            )
        if not subnets:
            report.add(
                *where, f"{label} admits no subnet, so the app cannot reach it", "admit the app's subnet"
            )
        needed = policy.SUBNET_RESTRICTED[service]
        for subnet_id, ignore_missing in subnets:
            name = _subnet(subnet_id)
            if name not in workloads:
                report.add(
                    *where,
                    f"{label} admits subnet {name or shown(subnet_id)}, which neither the Function App "
                    f"nor the agent runs in (theirs: {', '.join(sorted(workloads)) or 'none'})",
                    "admit only the workloads' subnets",
                )
            elif needed not in endpoints.get(name, set()):
                report.add(
                    *where,
                    f"{label} admits subnet {name}, which carries no {needed} service endpoint, so the "
                    "rule admits nothing",
                    f"add the {needed} service endpoint to that subnet (network.bicep)",
                )
            if ignore_missing is True:
                report.add(
                    *where,
                    f"{label} ignores a missing service endpoint on subnet {name}",
                    "set ignoreMissingVnetServiceEndpoint to false",
                )
        for address in addresses:
            if isinstance(address, str):
                report.add(
                    *where,
                    f"{label} admits the address {address!r} written in the Bicep"
                    + (" (every Azure datacenter, for Cosmos DB)" if address.startswith("0.0.0.0") else ""),
                    "admit the operator's address through main.bicep's operatorIpAddress only",
                )


def _check_firewall(resources: list[tuple[Instance, Resource]], report: Report) -> None:
    for _, rule in resources:
        if _is(rule, SQL_FIREWALL_RULE):
            start, end = rule.get("properties", "startIpAddress"), rule.get("properties", "endIpAddress")
            if start == "0.0.0.0" and end == "0.0.0.0":
                report.add(
                    rule.file.rel,
                    rule.line,
                    f"SQL firewall rule '{rule.symbol}' allows all Azure services (0.0.0.0): any Azure "
                    "customer's resources reach the server",
                    "admit the Function App's subnet (virtualNetworkRules) or use a private endpoint",
                )


def _check_isolated(
    deployment: Deployment, resources: list[tuple[Instance, Resource]], report: Report
) -> None:
    endpoints = _endpoint_targets(deployment)
    for instance, resource in resources:
        service = next((t for t in policy.DATA_SERVICES if _is(resource, t)), None)
        if service is None:
            continue
        label = f"{resource.type} '{resource.symbol}'"
        access = resource.get("properties", "publicNetworkAccess")
        if access != "Disabled":
            report.add(
                resource.file.rel,
                resource.file.line_of("publicNetworkAccess", resource.line, resource.end_line)
                or resource.line,
                f"with networkIsolation, {label} is reachable publicly (publicNetworkAccess {shown(access)})",
                "set publicNetworkAccess: 'Disabled' when networkIsolation is on",
            )
        if (instance.path, resource.symbol) not in endpoints:
            report.add(
                resource.file.rel,
                resource.line,
                f"with networkIsolation, {label} has no private endpoint",
                "add one in infra/modules/network.bicep (main.bicep privateEndpoints) with its DNS zone",
            )
        sku = policy.PRIVATE_ENDPOINT_SKUS.get(service)
        if sku is not None and resource.get("sku", "name") != sku:
            report.add(
                resource.file.rel,
                resource.file.line_of("sku", resource.line, resource.end_line) or resource.line,
                f"with networkIsolation, {label} is {shown(resource.get('sku', 'name'))}: private "
                f"endpoints need {sku}",
                f"raise its SKU to {sku} when networkIsolation is on",
            )
    for _, resource in resources:
        if _is(resource, "Microsoft.Web/sites") and not resource.get("properties", "virtualNetworkSubnetId"):
            report.add(
                resource.file.rel,
                resource.line,
                f"with networkIsolation, the Function App '{resource.symbol}' is not integrated "
                "into a subnet",
                "set properties.virtualNetworkSubnetId to the app subnet (network.bicep)",
            )
        if _is(resource, "Microsoft.App/managedEnvironments"):
            subnet = resource.get("properties", "vnetConfiguration", "infrastructureSubnetId")
            if not subnet:
                report.add(
                    resource.file.rel,
                    resource.line,
                    f"with networkIsolation, the Container Apps environment '{resource.symbol}' is not "
                    "in the virtual network, so the agent cannot reach Service Bus's private endpoint",
                    "set vnetConfiguration.infrastructureSubnetId to the agent subnet (network.bicep)",
                )


def check_docs(root: Path, found: Mapping[Any, Deployment], report: Report) -> None:
    """docs/deploying.md lists, for each mode, the resource types with a public endpoint."""
    rel = policy.PUBLIC_ENDPOINTS_DOC
    path = root / rel
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    listed = {
        match.group(1) == "true": set(DOC_ITEM.findall(match.group(2))) for match in DOC_LIST.finditer(text)
    }
    for isolated in (False, True):
        deployments = [d for combination, d in found.items() if combination.network_isolation is isolated]
        if not deployments:
            continue
        actual = set().union(*(public_types(d) for d in deployments))
        marker = f"<!-- public-endpoints networkIsolation={str(isolated).lower()} -->"
        if isolated not in listed:
            report.add(
                rel,
                None,
                f"no list of public endpoints for networkIsolation={str(isolated).lower()}",
                f"list them between '{marker}' and '<!-- /public-endpoints -->'",
            )
            continue
        line = _line_of(text, marker)
        for kind in sorted(actual - listed[isolated]):
            report.add(
                rel,
                line,
                f"networkIsolation={str(isolated).lower()}: {kind} has a public endpoint "
                "in the Bicep but is not listed",
                "list it, or turn its public network access off",
            )
        for kind in sorted(listed[isolated] - actual):
            report.add(
                rel,
                line,
                f"networkIsolation={str(isolated).lower()}: {kind} is listed as public "
                "but has no public endpoint in the Bicep",
                "remove it from the list",
            )


def _line_of(text: str, needle: str) -> int | None:
    return next((n for n, line in enumerate(text.splitlines(), start=1) if needle in line), None)
