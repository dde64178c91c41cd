"""Submitting applications (E16): who may submit, and where each one hears back.

An app is known by its Entra application (client) ID, which the front end reads from the
caller's verified application token (``azp``); everything else follows from the registered
name: its private status queue is ``status-<name>``. Nothing an app sends in a message body decides any of it.
"""

import re
from collections.abc import Mapping
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


# --- Who the verified token says is calling -------------------------------------------------

# The app role the front end's app registration exposes and each submitting app's service
# principal is assigned (infra/scripts/app_roles.py): an application token carries it in ``roles``.
SUBMIT_ROLE = "Orders.Submit"


class NotAuthenticated(ValueError):
    """401: no token, or one that is not a valid token for this API."""


class NotPermitted(ValueError):
    """403: a valid token that does not make its bearer a registered submitting app."""


class NotRegistered(NotPermitted):
    """403: an application with the role that is not (or no longer) in ``SAS_SUBMITTERS``."""


def caller_client_id(claims: Mapping[str, object]) -> str:
    """The calling application's client ID, from a token whose signature, issuer, audience and
    lifetime were verified. Only application tokens (client credentials) with the submit role
    count: a user's delegated token obtained through a submitting app's registration carries the
    same ``azp``, and must not act as that app."""
    if "scp" in claims or claims.get("idtyp") != "app":
        raise NotPermitted("only application tokens (client credentials) may call this API")
    roles = claims.get("roles")
    if not isinstance(roles, list) or SUBMIT_ROLE not in roles:
        raise NotPermitted(f"the calling application is not assigned the app role {SUBMIT_ROLE}")
    return calling_application(claims)


def calling_application(claims: Mapping[str, object]) -> str:
    """The one client ID a verified token names as its caller (``azp`` or ``appid``)."""
    ids = {
        str(claims[name]) for name in CLIENT_ID_CLAIMS if isinstance(claims.get(name), str) and claims[name]
    }
    if len(ids) != 1:
        raise NotAuthenticated("the token names no single calling application (azp or appid)")
    return ids.pop()


def authorised_app(claims: Mapping[str, object], registry: Registry) -> SubmittingApp:
    """The registered submitting app a verified token belongs to."""
    client_id = caller_client_id(claims)
    app = registry.by_client_id(client_id)
    if app is None:
        raise NotRegistered(f"application {client_id} is not a registered submitting app")
    return app
