"""The LeaderLease contract (R10): one holder at a time, renewals, release, takeover."""

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from adapters.clock import ManualClock
from adapters.sqlite.lease import SqliteLeaderLease
from adapters.storage.lease import BlobLeaderLease
from domain.ports import LeaderLease
from tests.support.clock import T0
from tests.support.emulators import AZURITE_KEY
from tests.support.tiers import backend_params


def _blob_lease(request: pytest.FixtureRequest) -> LeaderLease:
    blob_endpoint = request.getfixturevalue("azurite_blob_endpoint")
    service = BlobServiceClient(
        blob_endpoint, credential={"account_name": "devstoreaccount1", "account_key": AZURITE_KEY}
    )
    container = service.create_container(f"leases{uuid.uuid4().hex[:10]}")
    return BlobLeaderLease(container.get_blob_client("supervisor"), timedelta(seconds=15))


LEASES: dict[str, Callable[[Path, pytest.FixtureRequest], LeaderLease]] = {
    "sqlite": lambda tmp, request: SqliteLeaderLease(
        tmp / "leases.db", "supervisor", timedelta(seconds=30), ManualClock(T0)
    ),
    "blob": lambda tmp, request: _blob_lease(request),
}


@pytest.fixture(params=backend_params(LEASES, emulated={"blob"}))  # Azurite
def lease(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LeaderLease]:
    yield LEASES[request.param](tmp_path, request)


def test_one_holder_at_a_time(lease: LeaderLease) -> None:
    assert lease.acquire("supervisor-a")
    assert not lease.acquire("supervisor-b")
    assert lease.acquire("supervisor-a")  # a renewal
    assert not lease.acquire("supervisor-b")


def test_release_lets_another_take_over(lease: LeaderLease) -> None:
    assert lease.acquire("supervisor-a")
    lease.release("supervisor-b")  # not the holder: nothing happens
    assert not lease.acquire("supervisor-b")
    lease.release("supervisor-a")
    assert lease.acquire("supervisor-b")
    assert not lease.acquire("supervisor-a")


def test_an_expired_lease_is_taken_over(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    lease = SqliteLeaderLease(tmp_path / "leases.db", "supervisor", timedelta(seconds=30), clock)
    assert lease.acquire("supervisor-a")
    clock.advance(timedelta(seconds=29))
    assert not lease.acquire("supervisor-b")
    clock.advance(timedelta(seconds=2))  # a leader that stopped renewing: R11
    assert lease.acquire("supervisor-b")
    assert not lease.acquire("supervisor-a")
