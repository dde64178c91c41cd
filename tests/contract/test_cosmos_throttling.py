"""Cosmos DB throttling (429) on the state store, against the Cosmos server: the SDK retries,
honouring the service's ``x-ms-retry-after-ms``, within ``SAS_COSMOS_THROTTLE_RETRIES`` and
``SAS_COSMOS_THROTTLE_MAX_WAIT_SECONDS``, then fails the call so the attempt fails inside its
window. The server never throttles, so a transport in front of it answers 429 to chosen requests
(without forwarding them: a throttled write must not happen)."""

import time
import uuid
from typing import Any

import pytest
import requests
from azure.core.pipeline.transport import HttpRequest, RequestsTransport, RequestsTransportResponse
from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos.exceptions import CosmosHttpResponseError

from adapters import azure_profile
from settings import Settings, SettingsError
from tests.support.clock import T0
from tests.support.records import pending


class ThrottlingTransport(RequestsTransport):
    """Answers 429 to the next ``throttle`` document writes, then passes everything through."""

    def __init__(self, throttle: int, retry_after_ms: int) -> None:
        super().__init__()
        self.throttle = throttle
        self.retry_after_ms = retry_after_ms
        self.throttled = 0
        self.writes = 0

    def send(self, request: HttpRequest, **kwargs: Any) -> RequestsTransportResponse:  # type: ignore[override]
        headers = {k.lower() for k in request.headers}
        if (
            request.method in ("PUT", "POST")
            and "/docs" in request.url
            and "x-ms-documentdb-isquery" not in headers
        ):
            self.writes += 1
            if self.throttled < self.throttle:
                self.throttled += 1
                return self._too_many_requests(request)
        return super().send(request, **kwargs)

    def _too_many_requests(self, request: HttpRequest) -> RequestsTransportResponse:
        response = requests.Response()
        response.status_code = 429
        response.headers.update(
            {
                "x-ms-retry-after-ms": str(self.retry_after_ms),
                "x-ms-substatus": "3200",
                "Content-Type": "application/json",
            }
        )
        response._content = b'{"code": "TooManyRequests", "message": "Request rate is large"}'
        response.url = request.url
        return RequestsTransportResponse(request, response)


@pytest.fixture
def settings(cosmos_client: CosmosClient, cosmos_connection: str) -> Settings:
    database = f"sas{uuid.uuid4().hex[:8]}"
    cosmos_client.create_database(database).create_container("orderState", PartitionKey("/OrderID"))
    return Settings.from_env(
        {
            "SAS_PROFILE": "emulators",
            "CosmosDBConnection": cosmos_connection,
            "SAS_COSMOS_DATABASE": database,
            "SAS_COSMOS_THROTTLE_RETRIES": "3",
            "SAS_COSMOS_THROTTLE_MAX_WAIT_SECONDS": "2",
        }
    )


@pytest.mark.emulators  # the Cosmos DB server
def test_a_throttled_write_is_retried_after_the_servers_retry_after(settings: Settings) -> None:
    transport = ThrottlingTransport(throttle=2, retry_after_ms=200)
    store = azure_profile.cosmos_state_store(settings, transport=transport)
    started = time.monotonic()
    created = store.create_if_absent(pending("o-1", T0))
    assert created.created
    assert time.monotonic() - started >= 0.4  # waited what the server asked, twice
    assert (transport.throttled, transport.writes) == (2, 3)
    stored = store.get("o-1")
    assert stored is not None and stored.etag == created.stored.etag


@pytest.mark.emulators  # the Cosmos DB server
def test_throttling_beyond_the_retry_count_fails_the_call_and_writes_nothing(settings: Settings) -> None:
    transport = ThrottlingTransport(throttle=100, retry_after_ms=10)
    store = azure_profile.cosmos_state_store(settings, transport=transport)
    with pytest.raises(CosmosHttpResponseError) as raised:
        store.create_if_absent(pending("o-1", T0))
    assert raised.value.status_code == 429
    assert transport.writes == 1 + 3  # the first try and SAS_COSMOS_THROTTLE_RETRIES more
    assert store.get("o-1") is None


@pytest.mark.emulators  # the Cosmos DB server
def test_throttling_stops_at_the_max_wait_well_inside_a_step(settings: Settings) -> None:
    """The server asks for 1.5 s each time. The SDK starts no new wait once the total reaches the
    maximum (2 s): it waits 1.5 s, then 1.5 s more, then gives up — before its retry count (3)."""
    transport = ThrottlingTransport(throttle=100, retry_after_ms=1500)
    store = azure_profile.cosmos_state_store(settings, transport=transport)
    started = time.monotonic()
    with pytest.raises(CosmosHttpResponseError):
        store.create_if_absent(pending("o-2", T0))
    assert time.monotonic() - started < settings.cosmos_throttle_max_wait_seconds + 1.5 + 1
    assert transport.writes == 3


def test_the_throttle_wait_must_fit_inside_a_step() -> None:
    too_long = {
        "SAS_PROFILE": "emulators",
        "SAS_COSMOS_THROTTLE_MAX_WAIT_SECONDS": "30",
        "SAS_STEP_TIMEOUT_SECONDS": "20",
    }
    with pytest.raises(SettingsError, match="SAS_COSMOS_THROTTLE_MAX_WAIT_SECONDS=30 must be at most half"):
        Settings.from_env(too_long)
