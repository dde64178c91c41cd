"""The remote service, as the agent sees it: one HTTP call per attempt, classified.

2xx is a result; 4xx other than 408/429 is a permanent (business) refusal, never retried;
everything else — 5xx, 408, 429 (with its Retry-After), timeouts, connection errors, a lost
response — is transient.
"""

from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

# Which endpoint each agent action calls, and which remote service (circuit breaker) it belongs to.
ENDPOINTS: dict[str, tuple[str, str]] = {
    "ReserveInventory": ("inventory", "/inventory/reserve"),
    "ReleaseInventory": ("inventory", "/inventory/release"),
    "ChargePayment": ("payments", "/payments/charge"),
    "RefundPayment": ("payments", "/payments/refund"),
}


class TransientFailure(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PermanentFailure(Exception):
    pass


@dataclass(frozen=True)
class Endpoint:
    service: str
    path: str


def endpoint_for(action: str) -> Endpoint:
    if action not in ENDPOINTS:
        raise PermanentFailure(f"the agent has no remote operation for {action!r}")
    service, path = ENDPOINTS[action]
    return Endpoint(service, path)


def _retry_after(response: aiohttp.ClientResponse) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class AccessToken(Protocol):
    @property
    def token(self) -> str: ...


class TokenCredential(Protocol):
    """azure-identity's async credential, as far as the agent uses it."""

    async def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken: ...

    async def close(self) -> None: ...


class Bearer:
    """The agent identity's Entra token for the remote service's audience, on every call: the
    remote verifies it and admits the agent alone (simulator/callers.py). azure-identity caches
    the token and renews it before it expires."""

    def __init__(self, credential: TokenCredential, audience: str) -> None:
        self._credential = credential
        self._scope = f"{audience.rstrip('/')}/.default"

    async def header(self) -> str:
        try:
            return f"Bearer {(await self._credential.get_token(self._scope)).token}"
        except Exception as error:  # any credential failure: the call is retried later
            raise TransientFailure(f"no token for {self._scope}: {type(error).__name__}: {error}") from error

    async def close(self) -> None:
        await self._credential.close()


class RemoteService:
    def __init__(self, base_url: str, timeout_seconds: float, bearer: Bearer | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self._session: aiohttp.ClientSession | None = None
        self._bearer = bearer

    async def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    async def call(self, endpoint: Endpoint, idempotency_key: str, payload: dict[str, Any]) -> dict[str, Any]:
        session = await self._client()
        headers = {"Idempotency-Key": idempotency_key}
        if self._bearer is not None:
            headers["Authorization"] = await self._bearer.header()
        try:
            async with session.post(self.base_url + endpoint.path, json=payload, headers=headers) as response:
                if response.status < 300:
                    result: dict[str, Any] = await response.json()
                    return result
                text = (await response.text())[:500]
                if response.status in (408, 429) or response.status >= 500:
                    raise TransientFailure(f"HTTP {response.status}: {text}", _retry_after(response))
                raise PermanentFailure(f"HTTP {response.status}: {text}")
        except (TimeoutError, aiohttp.ClientError) as error:
            # Includes a response lost after the effect was applied (C10): the retry, with the same
            # idempotency key, gets the stored result instead of a second effect.
            raise TransientFailure(f"{type(error).__name__}: {error}") from error

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._bearer is not None:
            await self._bearer.close()
