"""The caller's Entra access token, verified (E16): PyJWT over the tenant's signing keys.

The same code in every profile; only the authority differs (Entra ID in Azure, the loopback
issuer of harness/standins/local_issuer.py locally). What is checked here is that the token is genuine and
current: RS256 only, signed by a key of the issuer's JWKS, this issuer, this tenant (``tid``), this
one audience (a list is refused), issued no later than now and lasting no longer than Entra ever
issues, within its lifetime by the app's clock. What the token entitles its bearer to is the domain's
(``domain.apps.authorised_app``).
"""

import json
import threading
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from typing import Any

import jwt

from domain.apps import NotAuthenticated
from domain.errors import DependencyUnavailable
from domain.ports import Clock

# Pinned: never taken from the token's header, so neither "none" nor an HMAC keyed with the
# public key can pass.
ALGORITHM = "RS256"
# Clock skew between the issuer and this host.
LEEWAY = timedelta(seconds=60)
# The longest an Entra access token lives: 60-90 minutes by default
# (https://learn.microsoft.com/entra/identity-platform/access-tokens, "Token lifetime"), at most one
# day under a token lifetime policy (AccessTokenLifetime's maximum,
# https://learn.microsoft.com/entra/identity-platform/configurable-token-lifetimes). A longer
# exp - iat was not minted by Entra, or was minted to outlive a revocation.
MAX_LIFETIME = timedelta(days=1)
# Application tokens are 1-2 KB; a bigger one is refused before anything parses it.
MAX_TOKEN_CHARS = 8000
# A token with an unknown kid refreshes the key set at most this often, so forged kids cannot turn
# every request into a call to the keys endpoint; the first rotation after a quiet spell is seen at once.
UNKNOWN_KID_REFRESH = timedelta(minutes=1)
# Entra rolls its keys over weeks and publishes new ones in advance: a day's cache is safe.
KEY_SET_LIFESPAN_SECONDS = 24 * 3600
SIGNING_KEYS = "token signing keys endpoint"


class EntraTokens:
    """Verifies bearer tokens of one tenant's v2.0 issuer for one audience."""

    def __init__(self, authority: str, tenant_id: str, audience: str, clock: Clock, timeout: float) -> None:
        self.issuer = f"{authority.rstrip('/')}/{tenant_id}/v2.0"
        self.tenant_id = tenant_id
        self.audience = audience
        self._configuration_url = f"{self.issuer}/.well-known/openid-configuration"
        self._clock = clock
        self._timeout = timeout
        self._lock = threading.Lock()
        self._keys: jwt.PyJWKClient | None = None
        self._refreshed_at: datetime | None = None

    def claims(self, token: str) -> dict[str, Any]:
        """The token's claims once it is proven genuine and current; ``NotAuthenticated`` if not,
        ``DependencyUnavailable`` while the issuer's keys cannot be read."""
        if len(token) > MAX_TOKEN_CHARS:
            raise NotAuthenticated("the bearer token is too large")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise NotAuthenticated("the bearer token is not a JWT") from None
        if header.get("alg") != ALGORITHM:
            raise NotAuthenticated(f"the bearer token must be signed with {ALGORITHM}")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise NotAuthenticated("the bearer token names no signing key (kid)")
        key = self._signing_key(kid)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=self.audience,
                issuer=self.issuer,
                # The lifetime is checked below against the app's clock (the host's, on virtual
                # time in tests), not the process's wall clock. strict_aud: PyJWT otherwise accepts
                # an aud list that merely contains this audience; Entra issues one string.
                options={
                    "require": ["exp", "nbf", "iat", "iss", "aud", "tid"],
                    "strict_aud": True,
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.InvalidAudienceError:
            raise NotAuthenticated("the bearer token is not for this API (audience)") from None
        except jwt.InvalidIssuerError:
            raise NotAuthenticated("the bearer token is not from this tenant's issuer") from None
        except jwt.InvalidTokenError:
            raise NotAuthenticated("the bearer token's signature or claims are not valid") from None
        # The issuer's path names the tenant, but a multi-tenant authority or a misrouted key set
        # could still sign another tenant's token: tid is the tenant that issued it.
        tenant = claims.get("tid")
        if not isinstance(tenant, str) or tenant.lower() != self.tenant_id.lower():
            raise NotAuthenticated("the bearer token is not from this tenant (tid)")
        self._check_lifetime(claims)
        return claims

    def _check_lifetime(self, claims: dict[str, Any]) -> None:
        exp, nbf, iat = (_instant(claims, name) for name in ("exp", "nbf", "iat"))
        now = self._clock.now().timestamp()
        leeway = LEEWAY.total_seconds()
        if now + leeway < iat:
            raise NotAuthenticated("the bearer token is issued in the future (iat)")
        if exp - iat > MAX_LIFETIME.total_seconds():
            raise NotAuthenticated("the bearer token lives longer than Entra issues (exp - iat)")
        if now >= exp + leeway:
            raise NotAuthenticated("the bearer token has expired")
        if now + leeway < nbf:
            raise NotAuthenticated("the bearer token is not valid yet")

    def _signing_key(self, kid: str) -> Any:
        keys = self._key_client()
        try:
            found = _match(keys.get_jwk_set(), kid)
            if found is None and self._may_refresh():
                found = _match(keys.get_jwk_set(refresh=True), kid)
        except jwt.PyJWKClientConnectionError as error:
            raise DependencyUnavailable(SIGNING_KEYS, str(error)) from None
        except (jwt.PyJWKClientError, jwt.PyJWKSetError) as error:
            raise DependencyUnavailable(SIGNING_KEYS, f"no usable key set: {error}") from None
        if found is None:
            raise NotAuthenticated("the bearer token is signed by a key this issuer does not publish")
        return found

    def _may_refresh(self) -> bool:
        with self._lock:
            now = self._clock.now()
            if self._refreshed_at is not None and now - self._refreshed_at < UNKNOWN_KID_REFRESH:
                return False
            self._refreshed_at = now
            return True

    def _key_client(self) -> jwt.PyJWKClient:
        """The JWKS client for the ``jwks_uri`` of the issuer's OpenID configuration, read once;
        a failed read is tried again on the next request."""
        with self._lock:
            if self._keys is None:
                self._keys = jwt.PyJWKClient(
                    self._jwks_uri(), lifespan=KEY_SET_LIFESPAN_SECONDS, timeout=self._timeout
                )
            return self._keys

    def _jwks_uri(self) -> str:
        try:
            with urllib.request.urlopen(self._configuration_url, timeout=self._timeout) as response:
                configuration = json.load(response)
        except (OSError, ValueError) as error:
            raise DependencyUnavailable(SIGNING_KEYS, f"OpenID configuration: {error}") from None
        issuer = configuration.get("issuer") if isinstance(configuration, dict) else None
        jwks_uri = configuration.get("jwks_uri") if isinstance(configuration, dict) else None
        if issuer != self.issuer or not isinstance(jwks_uri, str):
            raise DependencyUnavailable(
                SIGNING_KEYS, f"the OpenID configuration at {self._configuration_url} is not {self.issuer}'s"
            )
        return jwks_uri


def _instant(claims: dict[str, Any], name: str) -> float:
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise NotAuthenticated(f"the bearer token's lifetime ({name}) is not a time")
    return float(value)


def _match(keys: jwt.PyJWKSet, kid: str) -> Any:
    return next((key.key for key in keys.keys if key.key_id == kid), None)
