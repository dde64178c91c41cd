"""The simulator as the remote service in Azure admits the agent's token alone (simulator/callers.py),
verified against a real issuer on loopback (harness/standins/local_issuer.py); unconfigured, it admits
anyone."""

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agent_worker.remote import Bearer, Endpoint, PermanentFailure, RemoteService
from harness.standins.local_issuer import LocalIssuer
from simulator.app import create_app
from simulator.callers import CallerSettingsError, caller_check

TENANT = "7e000000-0000-4000-8000-000000000007"
AUDIENCE = "5e000000-0000-4000-8000-000000000005"  # the remote registration's client ID
AGENT = "a9000000-0000-4000-8000-000000000009"  # the agent identity's client ID
OTHER = "b0000000-0000-4000-8000-00000000000b"
RESERVE = "/inventory/reserve"


@pytest.fixture
def issuer() -> Iterator[LocalIssuer]:
    with LocalIssuer(TENANT, AUDIENCE) as running:
        yield running


def settings(issuer: LocalIssuer, allowed: str = AGENT) -> dict[str, str]:
    return {
        "SIMULATOR_AUTH_AUTHORITY": issuer.authority,
        "SIMULATOR_AUTH_TENANT_ID": TENANT,
        "SIMULATOR_AUTH_AUDIENCE": AUDIENCE,
        "SIMULATOR_ALLOWED_CALLERS": allowed,
    }


async def statuses(tmp_path: Path, env: dict[str, str], headers: list[dict[str, str]]) -> list[int]:
    app = create_app(tmp_path / "ledger.db", callers=caller_check(env))
    found = []
    async with TestClient(TestServer(app)) as client:
        for header in headers:
            sent = {"Idempotency-Key": f"k-{uuid.uuid4().hex}", **header}
            async with client.post(RESERVE, json={"OrderID": "o-1"}, headers=sent) as response:
                found.append(response.status)
        async with client.get("/health") as health:
            found.append(health.status)
    return found


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_only_the_agents_application_token_is_admitted(tmp_path: Path, issuer: LocalIssuer) -> None:
    other_key = LocalIssuer(TENANT, AUDIENCE).key
    attempts = [
        bearer(issuer.mint(AGENT, roles=())),  # the agent: admitted
        {},  # no token
        {"Authorization": "Basic x"},
        bearer(issuer.mint(OTHER, roles=())),  # another app of the tenant
        bearer(issuer.mint(AGENT, changes={"aud": OTHER})),  # for another API
        bearer(issuer.mint(AGENT, changes={"iss": "https://elsewhere/v2.0"})),
        bearer(issuer.mint(AGENT, changes={"scp": "user_impersonation"})),  # delegated
        bearer(issuer.mint(AGENT, key=other_key)),  # forged
        bearer(issuer.mint(AGENT, changes={"exp": 1, "nbf": 0})),  # expired
    ]
    found = asyncio.run(statuses(tmp_path, settings(issuer), attempts))
    assert found == [200, *([401] * (len(attempts) - 1)), 200]  # /health needs no token


def test_unconfigured_it_admits_any_caller_as_locally(tmp_path: Path) -> None:
    assert caller_check({}) is None
    assert asyncio.run(statuses(tmp_path, {}, [{}])) == [200, 200]


def test_half_a_configuration_is_refused(issuer: LocalIssuer) -> None:
    with pytest.raises(CallerSettingsError):
        caller_check(settings(issuer, allowed=""))
    with pytest.raises(CallerSettingsError):
        caller_check({"SIMULATOR_AUTH_AUDIENCE": AUDIENCE})


class IssuerCredential:
    """azure-identity's shape, minting the agent's token from the local issuer."""

    def __init__(self, issuer: LocalIssuer) -> None:
        self.issuer = issuer
        self.scopes: list[str] = []
        self.closed = False

    async def get_token(self, *scopes: str, **_: Any) -> Any:
        self.scopes += scopes
        return type("Token", (), {"token": self.issuer.mint(AGENT, roles=())})()

    async def close(self) -> None:
        self.closed = True


def test_the_agent_presents_its_token_and_the_simulator_admits_it(
    tmp_path: Path, issuer: LocalIssuer
) -> None:
    credential = IssuerCredential(issuer)

    async def scenario() -> tuple[dict[str, Any], str | None]:
        app = create_app(tmp_path / "ledger.db", callers=caller_check(settings(issuer)))
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        url = f"http://127.0.0.1:{port}"
        try:
            with_token = RemoteService(url, 5, Bearer(credential, f"api://{AUDIENCE}"))
            result = await with_token.call(Endpoint("inventory", RESERVE), "k-1", {"OrderID": "o-1"})
            await with_token.close()
            without = RemoteService(url, 5)
            refused: str | None = None
            try:
                await without.call(Endpoint("inventory", RESERVE), "k-2", {"OrderID": "o-2"})
            except PermanentFailure as error:  # how the agent classifies a 401
                refused = str(error)
            await without.close()
            return result, refused
        finally:
            await runner.cleanup()

    result, refused = asyncio.run(scenario())
    assert "ReservationId" in result
    assert credential.scopes == [f"api://{AUDIENCE}/.default"]
    assert credential.closed
    assert refused is not None and "HTTP 401" in refused
