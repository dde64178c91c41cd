"""A submitting app's access token for the front end, got the way the app itself gets one:
client credentials for the scope ``api://<SAS_AUTH_AUDIENCE>/.default``.

Locally (an authority on loopback: harness/standins/local_issuer.py) the issuer's token endpoint is asked
for the named app's client ID, as Entra would be with that app's credential. Against Entra ID
only the app itself can get one, with its own credential (azure-identity; docs/deploying.md
"A submitting app's token", and docs/submitting_app.py).
"""

import json
import os
import urllib.error
import urllib.parse
import urllib.request

from ops.apps import registered
from ops.output import Output
from settings import Settings

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class TokenError(Exception):
    """No token: the message says why."""


def scope(settings: Settings) -> str:
    if settings.auth_audience is None:
        raise TokenError("SAS_AUTH_AUDIENCE is not set: which API would the token be for?")
    return f"api://{settings.auth_audience}/.default"


def is_local(settings: Settings) -> bool:
    return urllib.parse.urlsplit(settings.auth_authority).hostname in LOOPBACK


def app_token(settings: Settings, name: str, timeout: float = 10) -> str:
    """An access token for the registered submitting app ``name`` (in ``SAS_SUBMITTERS``)."""
    app = settings.submitters.named(name)
    if app is None:
        raise TokenError(f"{name} is not in SAS_SUBMITTERS")
    wanted = scope(settings)
    if not is_local(settings):
        # Only the app holds its credential: in Azure it asks Entra itself (azure-identity).
        raise TokenError(
            f"{settings.auth_authority} is Entra ID: {name} gets its own token with its credential"
            f" (client credentials for {wanted}: docs/deploying.md)"
        )
    url = f"{settings.auth_authority.rstrip('/')}/{settings.auth_tenant_id}/oauth2/v2.0/token"
    form = {"grant_type": "client_credentials", "client_id": app.client_id, "scope": wanted}
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return str(json.load(response)["access_token"])
    except urllib.error.HTTPError as error:
        raise TokenError(f"the local issuer at {url} refused: {error.read().decode()[:200]}") from None
    except OSError as error:
        raise TokenError(
            f"no local issuer at {url} ({error}): start the stack with `make run` or `make demo`"
        ) from None


def show_token(app: str, out: Output) -> None:
    """``ops token``: a registered app's token, for a curl or a browser's developer tools."""
    settings = Settings.from_env(os.environ)
    issued = app_token(settings, registered(settings, app).name)
    out.line(json.dumps({"access_token": issued}) if out.as_json else issued)
