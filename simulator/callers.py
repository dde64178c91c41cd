"""Who may call the simulator when it stands in for the remote service in Azure: the agent alone.

Off unless configured (every local profile leaves it off, as a real remote service on loopback
would be). Configured by the environment, as the Container App sets it (infra/modules/
containerapp.bicep):

- ``SIMULATOR_AUTH_TENANT_ID`` and ``SIMULATOR_AUTH_AUDIENCE``: the tenant whose v2.0 issuer signs
  the caller's token and the client ID of the registration the token is for;
- ``SIMULATOR_AUTH_AUTHORITY``: Entra's sign-in endpoint (default the public cloud's);
- ``SIMULATOR_ALLOWED_CALLERS``: comma-separated client IDs that may call (the agent's managed
  identity); required once the rest is set.

The token itself is verified by the front end's verifier (``adapters.entra_tokens``: RS256 over
the issuer's published keys, issuer, audience, lifetime); this module adds what makes the caller
the agent: an application token (no ``scp``) whose ``azp``/``appid`` is an allowed client ID.
``/health`` stays open so the platform's probes need no token.
"""

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from adapters.clock import SystemClock
from adapters.entra_tokens import EntraTokens
from domain.apps import NotAuthenticated, calling_application
from domain.errors import DependencyUnavailable

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
OPEN_PATHS = frozenset({"/health"})
DEFAULT_AUTHORITY = "https://login.microsoftonline.com"
KEYS_TIMEOUT_SECONDS = 5.0


class CallerSettingsError(ValueError):
    pass


@dataclass(frozen=True)
class CallerCheck:
    tokens: EntraTokens
    allowed: frozenset[str]

    def caller(self, authorization: str) -> str:
        """The allowed client ID that presented this ``Authorization`` header; NotAuthenticated if none."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise NotAuthenticated("an Authorization: Bearer token is required")
        claims = self.tokens.claims(token.strip())
        return self._allowed(claims)

    def _allowed(self, claims: Mapping[str, Any]) -> str:
        if "scp" in claims:
            raise NotAuthenticated("a delegated (user) token: only the agent's application token may call")
        client = calling_application(claims)
        if client.lower() not in self.allowed:
            raise NotAuthenticated(f"client {client!r} may not call the remote service")
        return client


def caller_check(env: Mapping[str, str]) -> CallerCheck | None:
    """The check the environment asks for; None when it asks for none."""
    tenant = env.get("SIMULATOR_AUTH_TENANT_ID", "").strip()
    audience = env.get("SIMULATOR_AUTH_AUDIENCE", "").strip()
    listed = env.get("SIMULATOR_ALLOWED_CALLERS", "").split(",")
    allowed = frozenset(c.strip().lower() for c in listed if c.strip())
    if not tenant and not audience:
        return None
    if not (tenant and audience and allowed):
        raise CallerSettingsError(
            "set SIMULATOR_AUTH_TENANT_ID, SIMULATOR_AUTH_AUDIENCE and SIMULATOR_ALLOWED_CALLERS together"
        )
    authority = env.get("SIMULATOR_AUTH_AUTHORITY", "").strip() or DEFAULT_AUTHORITY
    return CallerCheck(EntraTokens(authority, tenant, audience, SystemClock(), KEYS_TIMEOUT_SECONDS), allowed)


def middleware(check: CallerCheck) -> Any:
    @web.middleware
    async def verify(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        try:
            # The first call reads the issuer's keys over HTTP: off the event loop.
            await asyncio.to_thread(check.caller, request.headers.get("Authorization", ""))
        except NotAuthenticated as refused:
            return web.json_response(
                {"error": str(refused)}, status=401, headers={"WWW-Authenticate": "Bearer"}
            )
        except DependencyUnavailable as down:
            return web.json_response({"error": str(down)}, status=503, headers={"Retry-After": "5"})
        return await handler(request)

    return verify
