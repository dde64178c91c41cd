"""azd postprovision step (E16): the front end's app registration exposes the ``Orders.Submit``
app role, and each submitting app's service principal is assigned it.

The front end refuses an application token without that role (domain/apps.py ``SUBMIT_ROLE``).
Bicep cannot declare it here: the Microsoft Graph Bicep extension's resources are beyond what the
offline checkers parse (tools/iac/README.md), so this script does it with the Azure CLI, from the
outputs of main.bicep that azd passes to hooks: ``SAS_FRONTEND_CLIENT_ID`` (the registration) and
``SAS_SUBMITTERS`` (exactly the Function App's registry: ``name=clientId`` pairs). It also makes
the registration issue v2.0 tokens (their ``aud`` is the client ID, their issuer the tenant's v2.0
one, as SAS_AUTH_* expect) with the ``idtyp`` claim, which tells application tokens from
delegated ones. tools/iac/app_roles.py checks this file, the outputs and the hooks that run it.

Idempotent: safe to run again (``azd hooks run postprovision``). Needs the Azure CLI, signed in
as an owner of the front end's registration (the preprovision hook makes its creator one) to set
its role; assigning the role to an app needs more (``ASSIGN_PRIVILEGE``). Without it, this prints
the exact command for someone who has it and goes on: the deployment itself is not held up.

The front end's client ID reaches the Function App only through a provision: when the registration
was made after this provision's Bicep ran (``API_AUDIENCE``, an output, does not name it), this
says to run ``azd provision`` again.
"""

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

# The role's id is fixed, so every run and every environment means the same role.
APP_ROLE: dict[str, Any] = {
    "id": "5f1bd2d6-6f2a-4d38-9a52-0c6f3a2b7e11",
    "value": "Orders.Submit",
    "allowedMemberTypes": ["Application"],
    "displayName": "Submit orders",
    "description": "Submit orders and read the caller's own orders (registered submitting apps only).",
    "isEnabled": True,
}
OPTIONAL_CLAIMS = {"accessToken": [{"name": "idtyp", "essential": False, "additionalProperties": []}]}
GRAPH = "https://graph.microsoft.com/v1.0"
# Graph's rule for appRoleAssignedTo (serviceprincipal-post-approleassignedto): a signed-in user
# needs one of its listed Entra roles, of which Cloud Application Administrator is the narrowest.
ASSIGN_PRIVILEGE = (
    "the Entra role Cloud Application Administrator (or Application Administrator); a pipeline's "
    "service principal needs the Graph application permissions AppRoleAssignment.ReadWrite.All and "
    "Application.Read.All"
)


def az(*args: str) -> Any:
    done = subprocess.run(["az", *args, "--output", "json"], check=True, capture_output=True, text=True)
    return json.loads(done.stdout) if done.stdout.strip() else None


def with_file(value: object) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(value, handle)
        return handle.name


def submitter_client_ids(text: str) -> dict[str, str]:
    pairs = (item.partition("=") for item in text.split(",") if item.strip())
    return {name.strip(): client.strip() for name, _, client in pairs}


def main() -> int:
    front_end = os.environ.get("SAS_FRONTEND_CLIENT_ID", "")
    submitters = submitter_client_ids(os.environ.get("SAS_SUBMITTERS", ""))
    if not front_end:
        print("app_roles: SAS_FRONTEND_CLIENT_ID is not set: no app role yet (azd hooks run preprovision)")
        return 0
    if os.environ.get("API_AUDIENCE", "") != f"api://{front_end}":
        print(
            f"app_roles: this provision ran without the front end's client ID {front_end}: "
            "run `azd provision` again so the Function App verifies tokens for it"
        )
    registration = az("ad", "app", "show", "--id", front_end)
    roles = [r for r in registration.get("appRoles", []) if r.get("value") != APP_ROLE["value"]]
    az("ad", "app", "update", "--id", front_end, "--app-roles", f"@{with_file([*roles, APP_ROLE])}")
    az("ad", "app", "update", "--id", front_end, "--optional-claims", f"@{with_file(OPTIONAL_CLAIMS)}")
    az("ad", "app", "update", "--id", front_end, "--set", "api.requestedAccessTokenVersion=2")
    try:
        resource = az("ad", "sp", "show", "--id", front_end)["id"]
    except subprocess.CalledProcessError:
        resource = az("ad", "sp", "create", "--id", front_end)["id"]
    assigned = az(
        "rest", "--method", "GET", "--url", f"{GRAPH}/servicePrincipals/{resource}/appRoleAssignedTo"
    )
    holders = {a["principalId"] for a in assigned.get("value", []) if a.get("appRoleId") == APP_ROLE["id"]}
    missing: list[str] = []
    for name, client_id in submitters.items():
        principal = az("ad", "sp", "show", "--id", client_id)["id"]
        if principal in holders:
            continue
        body = {"principalId": principal, "resourceId": resource, "appRoleId": APP_ROLE["id"]}
        url = f"{GRAPH}/servicePrincipals/{resource}/appRoleAssignedTo"
        try:
            az(
                "rest",
                "--method",
                "POST",
                "--url",
                url,
                "--headers",
                "Content-Type=application/json",
                "--body",
                json.dumps(body),
            )
        except subprocess.CalledProcessError:
            missing.append(name)
            print(
                f"app_roles: could not assign {APP_ROLE['value']} to {name} ({client_id}): it needs "
                f"{ASSIGN_PRIVILEGE}. Someone who has it runs:\n"
                f"  az rest --method POST --url {url} --headers Content-Type=application/json "
                f"--body '{json.dumps(body)}'"
            )
            continue
        print(f"app_roles: {name} ({client_id}) is assigned {APP_ROLE['value']}")
    held = len(submitters) - len(missing)
    print(f"app_roles: {held} of {len(submitters)} submitting app(s) hold {APP_ROLE['value']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
