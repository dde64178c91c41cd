"""azd postprovision step (E16): the front end's app registration exposes the ``Orders.Submit``
app role, and each submitting app's service principal is assigned it.

The front end refuses an application token without that role (domain/apps.py ``SUBMIT_ROLE``).
Bicep cannot declare it here: the Microsoft Graph Bicep extension's resources are beyond what the
offline checkers parse (harness/tools/iac/README.md), so this script does it with the Azure CLI, from the
outputs of main.bicep that azd passes to hooks: ``SAS_FRONTEND_CLIENT_ID`` (the registration) and
``SAS_SUBMITTERS`` (exactly the Function App's registry: ``name=clientId`` pairs). It also makes
the registration issue v2.0 tokens (their ``aud`` is the client ID, their issuer the tenant's v2.0
one, as SAS_AUTH_* expect) with the ``idtyp`` claim, which tells application tokens from
delegated ones. harness/tools/iac/app_roles.py checks this file, the outputs and the hooks that run it.

Idempotent: safe to run again (``azd hooks run postprovision``). Needs the Azure CLI, signed in
as an owner of the front end's registration (the preprovision hook makes its creator one) to set
its role (``OWNER_PRIVILEGE``); assigning the role to an app needs more (``ASSIGN_PRIVILEGE``),
and the app a service principal in this tenant. Each refusal, and a submitting app without a
service principal, is one line (azcli.refusal) with the exact command for someone who has the
right; the script goes on, says what remains, and exits 0: the deployment itself is complete. Any
other failure of the Azure CLI is one line too, and exits 1.

The front end's client ID reaches the Function App only through a provision: when the registration
was made after this provision's Bicep ran (``API_AUDIENCE``, an output, does not name it), this
says to run ``azd provision`` again.
"""

import json
import os
import sys
import tempfile
from typing import Any

from azcli import AzError, az, refusal

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
# Updating a registration (its app roles, claims, token version), or making an app's service
# principal: an owner of the registration may; otherwise one of these.
OWNER_PRIVILEGE = (
    "ownership of the registration (the pre-provision step makes its creator an owner), or the "
    "Entra role Cloud Application Administrator; a pipeline's service principal needs the Graph "
    "application permission Application.ReadWrite.OwnedBy as an owner, else Application.ReadWrite.All"
)
STEP = "app_roles"


def with_file(value: object) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(value, handle)
        return handle.name


def submitter_client_ids(text: str) -> dict[str, str]:
    pairs = (item.partition("=") for item in text.split(",") if item.strip())
    return {name.strip(): client.strip() for name, _, client in pairs}


def define_role(front_end: str) -> str:
    """The front end's registration with APP_ROLE, the idtyp claim and v2.0 tokens; the object ID
    of its service principal (the resource the role is assigned on)."""
    registration = az("ad", "app", "show", "--id", front_end)
    roles = [r for r in registration.get("appRoles", []) if r.get("value") != APP_ROLE["value"]]
    az("ad", "app", "update", "--id", front_end, "--app-roles", f"@{with_file([*roles, APP_ROLE])}")
    az("ad", "app", "update", "--id", front_end, "--optional-claims", f"@{with_file(OPTIONAL_CLAIMS)}")
    az("ad", "app", "update", "--id", front_end, "--set", "api.requestedAccessTokenVersion=2")
    try:
        return str(az("ad", "sp", "show", "--id", front_end)["id"])
    except AzError as error:
        if not error.missing:
            raise
        return str(az("ad", "sp", "create", "--id", front_end)["id"])


def stopped(error: AzError, what: str, *, needed: str, command: str) -> int:
    """A step that cannot go on: a refusal is one line with what it needs, and the hook goes on
    (exit 0: the deployment is complete); any other failure is one line, and exit 1."""
    if error.refused:
        remains = (
            f"Remains: {APP_ROLE['value']} for every submitting app; until then the front end refuses them."
        )
        print(refusal(STEP, what, error.reason, needed=needed, command=command, meanwhile=remains))
        return 0
    print(f"{STEP}: could not {what}: {error}. Then run again: azd hooks run postprovision")
    return 1


def assign(name: str, client_id: str, resource: str, holders: set[str]) -> bool:
    """APP_ROLE for this submitting app, or the line saying who can give it; whether it holds it."""
    what = f"assign {APP_ROLE['value']} to {name} ({client_id})"
    try:
        principal = az("ad", "sp", "show", "--id", client_id)["id"]
    except AzError as error:
        if not error.missing:
            raise
        print(
            refusal(
                STEP,
                what,
                "it has no service principal in this tenant",
                needed=OWNER_PRIVILEGE,
                command=f"az ad sp create --id {client_id}, then: azd hooks run postprovision",
                meanwhile=f"Until then {name} gets no token with the role, and the front end refuses it.",
            )
        )
        return False
    if principal in holders:
        return True
    body = {"principalId": principal, "resourceId": resource, "appRoleId": APP_ROLE["id"]}
    url = f"{GRAPH}/servicePrincipals/{resource}/appRoleAssignedTo"
    post = ["rest", "--method", "POST", "--url", url, "--headers", "Content-Type=application/json"]
    try:
        az(*post, "--body", json.dumps(body))
    except AzError as error:
        if not error.refused:
            raise
        print(
            refusal(
                STEP,
                what,
                error.reason,
                needed=ASSIGN_PRIVILEGE,
                command=f"az {' '.join(post)} --body '{json.dumps(body)}'",
                meanwhile=f"Until then the front end refuses {name} (403 NotPermitted).",
            )
        )
        return False
    print(f"{STEP}: {name} ({client_id}) is assigned {APP_ROLE['value']}")
    return True


def main() -> int:
    if os.environ.get("SAS_PIPELINE", "").strip().lower() == "true":
        # Defining and assigning app roles needs Microsoft Graph rights a pipeline should not hold;
        # the assignments do not change from one deployment to the next.
        print(
            f"{STEP}: skipped in the pipeline (SAS_PIPELINE=true): it needs Microsoft Graph rights. "
            "A person runs it once, and again when a submitting app is added: azd hooks run postprovision"
        )
        return 0
    front_end = os.environ.get("SAS_FRONTEND_CLIENT_ID", "")
    submitters = submitter_client_ids(os.environ.get("SAS_SUBMITTERS", ""))
    if not front_end:
        print(f"{STEP}: SAS_FRONTEND_CLIENT_ID is not set: no app role yet (azd hooks run preprovision)")
        return 0
    if os.environ.get("API_AUDIENCE", "") != f"api://{front_end}":
        print(
            f"{STEP}: this provision ran without the front end's client ID {front_end}: "
            "run `azd provision` again so the Function App verifies tokens for it"
        )
    owner = os.environ.get("AZURE_PRINCIPAL_ID") or "<your object ID: az ad signed-in-user show --query id>"
    try:
        resource = define_role(front_end)
    except AzError as error:
        return stopped(
            error,
            f"set the {APP_ROLE['value']} app role on the front end's registration {front_end}",
            needed=OWNER_PRIVILEGE,
            command=f"az ad app owner add --id {front_end} --owner-object-id {owner}, "
            "then you run: azd hooks run postprovision",
        )
    url = f"{GRAPH}/servicePrincipals/{resource}/appRoleAssignedTo"
    try:
        assigned = az("rest", "--method", "GET", "--url", url)
        holders = {
            a["principalId"] for a in assigned.get("value", []) if a.get("appRoleId") == APP_ROLE["id"]
        }
        held = [name for name, client_id in submitters.items() if assign(name, client_id, resource, holders)]
    except AzError as error:
        return stopped(
            error,
            f"assign {APP_ROLE['value']} to the submitting apps",
            needed=ASSIGN_PRIVILEGE,
            command="azd hooks run postprovision",
        )
    missing = [name for name in submitters if name not in held]
    print(f"{STEP}: {len(held)} of {len(submitters)} submitting app(s) hold {APP_ROLE['value']}")
    if missing:
        print(f"{STEP}: remains: {', '.join(missing)}, by the commands above; the deployment is complete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
