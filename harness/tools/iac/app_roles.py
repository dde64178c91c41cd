"""The front end's token validation, as deployed (E16).

- The app role: ``infra/scripts/app_roles.py`` (run by both postprovision hooks) defines one
  application-only, enabled app role whose value is the role the code requires
  (``domain/apps.py`` ``SUBMIT_ROLE``).
- The assignments: that script assigns the role to every app of ``SAS_SUBMITTERS`` as main.bicep
  outputs it, and that output is the Function App's own ``SAS_SUBMITTERS`` (the same variable), so
  every registered app holds the role and no other app is assigned it here.
- The validator's settings (whose presence the settings cross-check requires): this tenant
  (``tenant().tenantId``), Entra's login endpoint of this cloud, and the front end's client ID.
"""

import ast
import json
import re
from pathlib import Path
from typing import Any

from harness.tools.iac import cross_checks
from harness.tools.iac.bicep import Instance
from harness.tools.iac.infra_rules import Deployment
from harness.tools.iac.problems import Report

SCRIPT = "infra/scripts/app_roles.py"
HOOKS = ("infra/scripts/postprovision.sh", "infra/scripts/postprovision.ps1")
CODE = "domain/apps.py"
# Setting -> what its Bicep value must be, and the fix.
VALIDATOR_SETTINGS = {
    "SAS_AUTH_TENANT_ID": (r"^tenant\(\)\.tenantId$", "tenant().tenantId: tokens of this tenant only"),
    "SAS_AUTH_AUTHORITY": (
        r"^environment\(\)\.authentication\.loginEndpoint$",
        "environment().authentication.loginEndpoint: Entra ID of this cloud",
    ),
    "SAS_AUTH_AUDIENCE": (r"^frontEndClientId$", "frontEndClientId: v2.0 tokens' aud is the API's client ID"),
}
GUID = re.compile(r"[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}")
OUTPUTS = {"SAS_FRONTEND_CLIENT_ID": "frontEndClientId", "SAS_SUBMITTERS": "functionApp.outputs.submitters"}


def check(root: Path, deployment: Deployment, main: Instance, report: Report) -> None:
    role = _code_role(root, report)
    _check_script(root, role, report)
    _check_hooks(root, report)
    _check_outputs(main, report)
    _check_settings(deployment, report)


def _assigned(tree: ast.Module, name: str) -> ast.expr | None:
    """The value a module-level ``name = ...`` (annotated or not) assigns."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return node.value
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node.value
    return None


def _literal(node: ast.expr | None) -> Any:
    try:
        return None if node is None else ast.literal_eval(node)
    except ValueError:
        return None


def _code_role(root: Path, report: Report) -> str | None:
    role = _literal(_assigned(ast.parse((root / CODE).read_text()), "SUBMIT_ROLE"))
    if isinstance(role, str):
        return role
    report.add(
        CODE, None, "defines no SUBMIT_ROLE string: which app role does the front end require?", "define it"
    )
    return None


def _check_script(root: Path, role: str | None, report: Report) -> None:
    path = root / SCRIPT
    if not path.is_file():
        report.add(
            SCRIPT, None, "missing: nothing exposes the front end's app role or assigns it", "restore it"
        )
        return
    text = path.read_text()
    node = _assigned(ast.parse(text), "APP_ROLE")
    found, line = _literal(node), None if node is None else node.lineno
    if not isinstance(found, dict):
        report.add(
            SCRIPT,
            line,
            "defines no literal APP_ROLE: the front end's app role is unknown",
            "define APP_ROLE as a dict literal",
        )
        return
    problems = [
        (
            role is not None and found.get("value") != role,
            f"APP_ROLE's value is {found.get('value')!r}, the front end requires {role!r} ({CODE})",
            f"set value to {role!r}",
        ),
        (
            found.get("allowedMemberTypes") != ["Application"],
            f"APP_ROLE is assignable to {found.get('allowedMemberTypes')}: only applications may hold it",
            "allowedMemberTypes: ['Application'] only",
        ),
        (
            found.get("isEnabled") is not True,
            "APP_ROLE is not enabled: no token would carry it",
            "isEnabled: True",
        ),
        (
            not GUID.fullmatch(str(found.get("id", ""))),
            "APP_ROLE has no fixed GUID id",
            "give it a literal GUID, the same in every environment",
        ),
    ]
    for broken, what, fix in problems:
        if broken:
            report.add(SCRIPT, line, what, fix)
    for name in OUTPUTS:
        if f'"{name}"' not in text:
            report.add(
                SCRIPT,
                None,
                f"does not read {name}: some submitting app would not be assigned the role",
                f"read os.environ[{name!r}]",
            )
    if "appRoleAssignedTo" not in text:
        report.add(
            SCRIPT,
            None,
            "assigns no app role (appRoleAssignedTo)",
            "assign APP_ROLE to each submitter's service principal",
        )


def _check_hooks(root: Path, report: Report) -> None:
    for hook in HOOKS:
        path = root / hook
        if not path.is_file() or "app_roles.py" not in path.read_text():
            report.add(
                hook,
                None,
                f"does not run {SCRIPT}: the app role and its assignments are never made",
                f"run {SCRIPT} in the hook",
            )


def _text(value: Any) -> str:
    """A pycep expression as Bicep text, for the plain names and property accesses used here."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "operator" in value:
        return _text(value["operator"])
    if isinstance(value, dict) and value.get("type") == "property_accessor":
        operands = value.get("operands") or {}
        return f"{_text(operands.get('operand_1'))}.{_text(operands.get('operand_2'))}"
    return json.dumps(value)


def _check_outputs(main: Instance, report: Report) -> None:
    outputs = main.file.section("outputs")
    for name, expected in OUTPUTS.items():
        raw = outputs.get(name)
        if raw is None:
            report.add(
                main.file.rel,
                None,
                f"main.bicep has no output {name}: {SCRIPT} cannot assign every submitting app the role",
                f"output {name} string = {expected}",
            )
            continue
        shown = _text(raw.get("value") if isinstance(raw, dict) else raw)
        if shown != expected:
            report.add(
                main.file.rel,
                raw.get("__start_line__") if isinstance(raw, dict) else None,
                f"output {name} is {shown!r}, not {expected}",
                f"output {name} string = {expected}",
            )


def _check_settings(deployment: Deployment, report: Report) -> None:
    for target in cross_checks.function_apps(deployment, Report()):
        source = _source_lines(deployment, target.file)
        for name, (pattern, fix) in VALIDATOR_SETTINGS.items():
            if name not in target.values:
                continue  # the settings cross-check reports it
            line = target.lines.get(name)
            written = source.get(line or -1, "")
            value = written.split(":", 1)[1].strip() if ":" in written else ""
            if not re.fullmatch(pattern, value):
                report.add(
                    target.file,
                    line or target.line,
                    f"{target.label} sets {name} to {value or '?'}",
                    f"set it to {fix}",
                )


def _source_lines(deployment: Deployment, rel: str) -> dict[int, str]:
    for instance in deployment.instances:
        if instance.file.rel == rel:
            return dict(enumerate(instance.file.text.splitlines(), start=1))
    return {}
