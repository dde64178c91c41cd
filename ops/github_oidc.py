"""The sample app's sign-in from a GitHub Actions job, with no secret: the job asks GitHub for an
OIDC token for Entra's token-exchange audience, and Entra trusts it through the federated
credential the registrations step gave the sample app (``SAS_PIPELINE_SUBJECT``). The request
URL and its bearer token exist only inside a job with ``permissions: id-token: write``.
https://docs.github.com/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect
"""

import json
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping

from ops.errors import BadArgument

FEDERATION = "github-actions"
AUDIENCE = "api://AzureADTokenExchange"
REQUEST_URL = "ACTIONS_ID_TOKEN_REQUEST_URL"
REQUEST_TOKEN = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"
TIMEOUT_SECONDS = 10


def assertion(environ: Mapping[str, str]) -> Callable[[], str]:
    """A function returning a fresh OIDC token of this job each time Entra's client asks."""
    url, bearer = environ.get(REQUEST_URL, ""), environ.get(REQUEST_TOKEN, "")
    if not url or not bearer:
        raise BadArgument(
            f"--azd: SAS_SAMPLE_APP_FEDERATION={FEDERATION} needs this job's OIDC token "
            f"({REQUEST_URL}, {REQUEST_TOKEN}): "
            "run it in a GitHub Actions job with permissions id-token: write"
        )
    separator = "&" if urllib.parse.urlparse(url).query else "?"
    request = urllib.request.Request(
        f"{url}{separator}{urllib.parse.urlencode({'audience': AUDIENCE})}",
        headers={"Authorization": f"Bearer {bearer}", "Accept": "application/json"},
    )

    def token() -> str:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            value = json.load(response).get("value")
        if not isinstance(value, str) or not value:
            raise BadArgument("--azd: GitHub's OIDC endpoint answered without a token")
        return value

    return token
