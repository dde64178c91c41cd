"""App Service Authentication (Easy Auth) on the Function App whenever ``frontEndClientId`` is set
(E16): a ``Microsoft.Web/sites/config`` named ``authsettingsV2`` that is deployed, on, requires
authentication everywhere (nothing excluded) and answers 401 without a token, validates tokens for
the front end's registration (``api://<frontEndClientId>``) and admits exactly the client IDs of
``submittingApps`` (an empty list would admit any application of the tenant). With an empty
``frontEndClientId`` it is not deployed. Evaluated on the probe deployments of ``isolation``.
"""

import json
from collections.abc import Sequence
from typing import Any

from harness.tools.iac import cross_checks, policy
from harness.tools.iac.bicep import Resource, Unknown
from harness.tools.iac.infra_rules import Deployment
from harness.tools.iac.problems import Report

WHY = "E16: every caller needs an Entra token of a registered submitting app; none gets 401"


def check(
    with_front_end: Deployment,
    without: Deployment,
    apps: Sequence[dict[str, str]],
    front_end: str,
    report: Report,
) -> None:
    configs = _configs(with_front_end)
    for config in configs:
        if isinstance(config.deployed, Unknown):
            report.add(
                config.file.rel,
                config.line,
                f"App Service Authentication '{config.symbol}': cannot tell offline whether it is deployed "
                f"when frontEndClientId is set ({config.deployed.why})",
                "deploy it if (!empty(frontEndClientId)), a condition on that parameter alone",
            )
        elif config.deployed is True:
            _check_config(config, apps, front_end, report)
    if not configs or all(config.deployed is False for config in configs):
        for site in (
            r for i in with_front_end.instances for r in i.all_resources() if cross_checks.is_function_app(r)
        ):
            report.add(
                site.file.rel,
                site.line,
                f"the Function App '{site.symbol}' gets no App Service Authentication "
                f"(Microsoft.Web/sites/config '{policy.EASY_AUTH_CONFIG}') when frontEndClientId is set",
                "deploy authsettingsV2 if (!empty(frontEndClientId)) (infra/modules/functionapp.bicep)",
            )
    for config in _configs(without):
        if config.deployed is True:
            report.add(
                config.file.rel,
                config.line,
                f"App Service Authentication '{config.symbol}' is deployed when frontEndClientId is empty",
                "deploy it only if (!empty(frontEndClientId)): without the API's registration there is "
                "nothing to validate tokens for, and the app refuses HTTP submissions",
            )


def _configs(deployment: Deployment) -> list[Resource]:
    found = []
    for config in deployment.resources("Microsoft.Web/sites/config"):
        name = config.name
        if isinstance(name, str) and name.rsplit("/", 1)[-1].lower() == policy.EASY_AUTH_CONFIG.lower():
            found.append(config)
    return found


def _shown(value: Any) -> str:
    if value is None:
        return "not set"
    if isinstance(value, Unknown):
        return f"unknown offline ({value.why})"
    return json.dumps(value, default=lambda v: f"<{v.why}>" if isinstance(v, Unknown) else str(v))


def _check_config(config: Resource, apps: Sequence[dict[str, str]], front_end: str, report: Report) -> None:
    label = f"App Service Authentication '{config.symbol}'"

    def problem(key: str, what: str, fix: str) -> None:
        line = config.file.line_of(key, config.line, config.end_line) or config.line
        report.add(config.file.rel, line, f"{label}: {what}", fix)

    for path, expected in policy.EASY_AUTH_REQUIRED.items():
        value = config.get("properties", *path)
        if not (value == expected and type(value) is type(expected)):
            shown = ".".join(path)
            problem(
                path[-1], f"{shown} is {_shown(value)}, must be {json.dumps(expected)}", f"set it ({WHY})"
            )
    excluded = config.get("properties", "globalValidation", "excludedPaths")
    if excluded not in (None, []):
        problem(
            "excludedPaths",
            f"excludes {_shown(excluded)} from authentication",
            "exclude nothing: the Durable client uses its local RPC endpoint and /admin is not behind "
            "Easy Auth (the comment in functionapp.bicep)",
        )
    aad = ("properties", "identityProviders", "azureActiveDirectory")
    client_id = config.get(*aad, "registration", "clientId")
    if client_id != front_end:
        problem(
            "clientId",
            f"registration.clientId is {_shown(client_id)}, not frontEndClientId",
            "set it to frontEndClientId",
        )
    if config.get(*aad, "registration", "openIdIssuer") is None:
        problem(
            "registration",
            "states no registration.openIdIssuer",
            "set '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'",
        )
    audiences = config.get(*aad, "validation", "allowedAudiences")
    if not (isinstance(audiences, list) and f"api://{front_end}" in audiences):
        problem(
            "allowedAudiences",
            f"validation.allowedAudiences is {_shown(audiences)}, without api://<frontEndClientId>",
            "set allowedAudiences: ['api://${frontEndClientId}'] (the API's App ID URI)",
        )
    allowed = config.get(*aad, "validation", "defaultAuthorizationPolicy", "allowedApplications")
    expected = sorted(app["clientId"].lower() for app in apps if app["clientId"])
    actual = (
        sorted(a.lower() for a in allowed if isinstance(a, str) and a) if isinstance(allowed, list) else None
    )
    known = isinstance(allowed, list) and all(isinstance(a, str) for a in allowed)
    if not known or actual != expected:
        problem(
            "allowedApplications",
            f"with the probe submittingApps (harness/tools/iac/isolation.py) allowedApplications is "
            f"{_shown(allowed)}, not their client IDs {json.dumps(expected)}",
            "set validation.defaultAuthorizationPolicy.allowedApplications to [for app in submittingApps: "
            "app.clientId] (an empty or missing list admits any application of the tenant)",
        )
