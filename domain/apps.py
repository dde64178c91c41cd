"""Submitting applications (E16): who may submit, and where each one hears back.

An app is known by its Entra application (client) ID, which App Service Authentication puts in
the caller's principal; everything else follows from the registered name: its private status
queue is ``status-<name>``. Nothing an app sends in a message body decides any of it.
"""

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

APP_NAME = re.compile(r"^[a-z][a-z0-9-]{0,29}$")
CLIENT_ID = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
# The claims that carry the calling application's client ID: ``appid`` in v1 access tokens,
# ``azp`` in v2 ones (Microsoft identity platform access token reference).
CLIENT_ID_CLAIMS = ("appid", "azp")


@dataclass(frozen=True)
class SubmittingApp:
    name: str
    client_id: str

    @property
    def status_queue(self) -> str:
        return f"status-{self.name}"


class RegistryError(ValueError):
    pass


@dataclass(frozen=True)
class Registry:
    """The registered apps, by name and by client ID."""

    apps: tuple[SubmittingApp, ...]

    def __post_init__(self) -> None:
        for app in self.apps:
            if not APP_NAME.fullmatch(app.name):
                raise RegistryError(f"app name {app.name!r}: lower-case letters, digits and '-', at most 30")
            if not CLIENT_ID.fullmatch(app.client_id):
                raise RegistryError(f"app {app.name}: client ID {app.client_id!r} is not a GUID")
        for label, keys in (
            ("name", [a.name for a in self.apps]),
            ("client ID", [a.client_id.lower() for a in self.apps]),
        ):
            repeated = sorted({k for k in keys if keys.count(k) > 1})
            if repeated:
                raise RegistryError(f"the same {label} is registered twice: {', '.join(repeated)}")

    @classmethod
    def parse(cls, text: str) -> "Registry":
        """``name=clientId`` pairs separated by commas, e.g. ``app-a=1111…,app-b=2222…``."""
        apps = []
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            name, sep, client_id = item.partition("=")
            if not sep:
                raise RegistryError(f"{item!r} is not name=clientId")
            apps.append(SubmittingApp(name.strip(), client_id.strip()))
        return cls(tuple(apps))

    def named(self, name: str) -> SubmittingApp | None:
        return next((app for app in self.apps if app.name == name), None)

    def by_client_id(self, client_id: str) -> SubmittingApp | None:
        wanted = client_id.lower()
        return next((app for app in self.apps if app.client_id.lower() == wanted), None)

    @property
    def status_queues(self) -> tuple[str, ...]:
        return tuple(app.status_queue for app in self.apps)


# --- App Service Authentication's principal header -------------------------------------------

PRINCIPAL_HEADER = "x-ms-client-principal"


class NotAuthenticated(ValueError):
    pass


def caller_client_id(headers: Mapping[str, str]) -> str:
    """The client ID of the calling application, from the principal App Service Authentication
    injects (base64 JSON with ``claims``: ``[{"typ", "val"}]``). The platform removes this header
    from incoming requests and sets it only after validating the caller's token."""
    encoded = next((v for k, v in headers.items() if k.lower() == PRINCIPAL_HEADER), None)
    if not encoded:
        raise NotAuthenticated("no authenticated caller (App Service Authentication principal missing)")
    try:
        principal = json.loads(base64.b64decode(encoded, validate=True))
        claims = {str(c["typ"]): str(c["val"]) for c in principal["claims"]}
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise NotAuthenticated("the caller's principal header is not valid") from None
    for claim in CLIENT_ID_CLAIMS:
        if claims.get(claim):
            return claims[claim]
    raise NotAuthenticated("the caller's principal carries no application ID (appid or azp claim)")


def principal_header(client_id: str, claims: Iterable[tuple[str, str]] = ()) -> dict[str, str]:
    """The header App Service Authentication would pass for an app calling with a client-credentials
    token: for calling a local host (devhost, ``func start``), which has no authentication module."""
    principal = {
        "auth_typ": "aad",
        "claims": [{"typ": "appid", "val": client_id}, *({"typ": t, "val": v} for t, v in claims)],
        "name_typ": "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name",
        "role_typ": "http://schemas.microsoft.com/ws/2008/06/identity/claims/role",
    }
    return {PRINCIPAL_HEADER: base64.b64encode(json.dumps(principal).encode()).decode()}
