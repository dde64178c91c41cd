"""The network (``networkIsolation``): which services are reachable from the internet.

In every combination:

- no SQL firewall rule admits all Azure services (``0.0.0.0``-``0.0.0.0``): it admits every
  Azure customer's resources, not this app's;
- the resources with a public endpoint (``policy.PUBLIC_ACCESS_PROPERTY``: public network access
  not ``'Disabled'``) are exactly those ``docs/deploying.md`` lists for that mode, between
  ``<!-- public-endpoints networkIsolation=false|true -->`` and ``<!-- /public-endpoints -->``
  (``check_docs``).

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

from tools.iac import policy
from tools.iac.bicep import Instance, Resource, Unknown, shown
from tools.iac.infra_rules import Deployment
from tools.iac.problems import Report

PRIVATE_ENDPOINT = "Microsoft.Network/privateEndpoints"
SQL_FIREWALL_RULE = "Microsoft.Sql/servers/firewallRules"
DOC_LIST = re.compile(
    r"<!-- public-endpoints networkIsolation=(true|false) -->(.*?)<!-- /public-endpoints -->", re.S
)
DOC_ITEM = re.compile(r"^\s*[-*]\s+`(Microsoft\.[A-Za-z]+/[A-Za-z/]+)`", re.M)

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
