"""A submitting app, to copy: post one order to the front end with an Entra application token.

    pip install azure-identity requests
    export AZURE_TENANT_ID=<tenant ID> AZURE_CLIENT_ID=<this app's client ID> AZURE_CLIENT_SECRET=<its secret>
    python submitting_app.py https://<function app>.azurewebsites.net <front end client ID> order.json

The token comes from the client credentials flow for the scope ``api://<front end client
ID>/.default``; azure-identity caches it and gets a new one before it expires. The app must be
registered in ``submittingApps`` (so ``SAS_SUBMITTERS`` names it) and assigned the front end's
``Orders.Submit`` app role (the post-provision step does both: docs/deploying.md). Instead of a
secret, a managed identity or a certificate works the same: use that credential class instead.
A user's token (``az login``) is refused: only application tokens may submit.
"""

import json
import sys

import requests
from azure.identity import EnvironmentCredential


def main(api: str, front_end_client_id: str, order_file: str) -> int:
    credential = EnvironmentCredential()  # AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET
    token = credential.get_token(f"api://{front_end_client_id}/.default").token
    with open(order_file, encoding="utf-8") as handle:
        order = json.load(handle)
    response = requests.post(
        f"{api.rstrip('/')}/api/orders",
        json=order,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    print(response.status_code, response.text)
    if response.status_code in {429, 503}:
        print(f"try again in {response.headers.get('Retry-After', '5')}s")
    return 0 if response.status_code == 202 else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
