"""The simulated remote service: idempotency by key, each fault, the ledger, the CLI."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from harness.standins.ports import free_port
from simulator.__main__ import main
from simulator.app import SIMULATOR, create_app
from simulator.ledger import Ledger
from simulator.profile import FaultProfile, load_profile

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T = TypeVar("T")
Client = TestClient[web.Request, web.Application]


def run[T](coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


class StepClock:
    """Each reading is one second after the previous one, so every stamp in the ledger is known."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> datetime:
        self.readings += 1
        return T0 + timedelta(seconds=self.readings - 1)


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def simulator(
    tmp_path: Path, profile: FaultProfile | None = None, **kwargs: Any
) -> AsyncIterator[Client]:
    app = create_app(tmp_path / "ledger.db", profile or FaultProfile(), **kwargs)
    async with TestClient(TestServer(app)) as client:
        yield client


async def call(
    client: Client, operation: str, key: str | None, body: object = None
) -> tuple[int, dict[str, Any], aiohttp.ClientResponse]:
    headers = {} if key is None else {"Idempotency-Key": key}
    payload = {"OrderID": "order-1"} if body is None else body
    async with client.post(f"/{operation}", json=payload, headers=headers) as response:
        return response.status, await response.json(), response


async def get(client: Client, path: str) -> Any:
    async with client.get(path) as response:
        assert response.status == 200
        return await response.json()


async def put_profile(client: Client, changes: object) -> tuple[int, dict[str, Any]]:
    async with client.put("/admin/profile", json=changes) as response:
        return response.status, await response.json()


async def outcomes(client: Client, key: str) -> list[str]:
    return [c["outcome"] for c in (await get(client, f"/ledger/{key}"))["calls"]]


async def effects(client: Client, key: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await get(client, f"/ledger/{key}"))["effects"]
    return found


def test_idempotent_by_key(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path) as client:
            first = await call(client, "inventory/reserve", "order-1:ReserveInventory")
            second = await call(client, "inventory/reserve", "order-1:ReserveInventory")
            other = await call(client, "inventory/reserve", "order-2:ReserveInventory")
            assert first[0] == second[0] == 200
            assert first[1] == second[1]
            assert first[1]["ReservationId"].startswith("res-")
            assert other[1] != first[1]
            assert await outcomes(client, "order-1:ReserveInventory") == ["ok", "replayed"]
            stored = await effects(client, "order-1:ReserveInventory")
            assert [(e["operation"], e["result"]) for e in stored] == [("inventory/reserve", first[1])]

    run(scenario())


@pytest.mark.parametrize(
    ("operation", "field", "prefix"),
    [
        ("inventory/reserve", "ReservationId", "res-"),
        ("inventory/release", "ReleaseId", "rel-"),
        ("payments/charge", "PaymentId", "pay-"),
        ("payments/refund", "RefundId", "ref-"),
    ],
)
def test_each_operation_answers_with_its_id(tmp_path: Path, operation: str, field: str, prefix: str) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path) as client:
            status, result, _ = await call(client, operation, "order-1:step", {"Amount": "25.00"})
            assert status == 200
            assert list(result) == [field]
            assert result[field].startswith(prefix)
            history = await get(client, "/ledger/order-1:step")
            assert history["calls"][0]["body"] == {"Amount": "25.00"}
            assert history["calls"][0]["operation"] == operation

    run(scenario())


def test_transient_faults_apply_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path, FaultProfile(transient_rate=1, seed=3)) as client:
            statuses = []
            for _ in range(30):
                status, body, response = await call(client, "payments/charge", "order-1:ChargePayment")
                assert "error" in body
                if status == 429:
                    assert response.headers["Retry-After"] == "1"
                statuses.append(status)
            assert set(statuses) == {503, 429}
            assert await outcomes(client, "order-1:ChargePayment") == ["transient"] * 30
            assert await effects(client, "order-1:ChargePayment") == []

    run(scenario())


def test_permanent_refusal_only_for_keys_without_an_effect(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path) as client:
            _, charged, _ = await call(client, "payments/charge", "order-1:ChargePayment")
            assert (await put_profile(client, {"permanent_rate": 1}))[0] == 200
            status, body, _ = await call(client, "payments/charge", "order-2:ChargePayment")
            assert status == 422
            assert "error" in body
            assert await effects(client, "order-2:ChargePayment") == []
            assert await outcomes(client, "order-2:ChargePayment") == ["permanent"]
            status, again, _ = await call(client, "payments/charge", "order-1:ChargePayment")
            assert (status, again) == (200, charged)
            assert await outcomes(client, "order-1:ChargePayment") == ["ok", "replayed"]

    run(scenario())


def test_an_undo_of_a_call_that_never_took_effect_succeeds_and_changes_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path) as client:
            undo = {"Undoes": "order-1:ChargePayment"}
            status, body, _ = await call(client, "payments/refund", "order-1:RefundPayment", undo)
            assert status == 200 and body["Noop"] is True
            assert await effects(client, "order-1:RefundPayment") == []
            # The forward call lands after all: the undo, repeated, now undoes it.
            await call(client, "payments/charge", "order-1:ChargePayment")
            status, body, _ = await call(client, "payments/refund", "order-1:RefundPayment", undo)
            assert status == 200 and "Noop" not in body
            assert len(await effects(client, "order-1:RefundPayment")) == 1
            assert await outcomes(client, "order-1:RefundPayment") == ["noop", "ok"]

    run(scenario())


def test_lost_response_applies_the_effect(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path, FaultProfile(lost_response_rate=1)) as client:
            with pytest.raises(aiohttp.ClientConnectionError):
                await call(client, "inventory/reserve", "order-1:ReserveInventory")
            stored = await effects(client, "order-1:ReserveInventory")
            assert len(stored) == 1
            # The retry with the same key is how a client recovers: it gets the stored result.
            status, result, _ = await call(client, "inventory/reserve", "order-1:ReserveInventory")
            assert (status, result) == (200, stored[0]["result"])
            assert await outcomes(client, "order-1:ReserveInventory") == ["lost", "replayed"]
            assert len(await effects(client, "order-1:ReserveInventory")) == 1

    run(scenario())


def test_outage_toggled_at_run_time(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path) as client:
            status, profile = await put_profile(client, {"outage": True})
            assert (status, profile["outage"]) == (200, True)
            assert (await call(client, "payments/refund", "order-1:RefundPayment"))[0] == 503
            assert await effects(client, "order-1:RefundPayment") == []
            await put_profile(client, {"outage": False})
            assert (await call(client, "payments/refund", "order-1:RefundPayment"))[0] == 200
            assert await outcomes(client, "order-1:RefundPayment") == ["outage", "ok"]

    run(scenario())


def test_outage_windows_follow_the_monotonic_clock(tmp_path: Path) -> None:
    monotonic = Monotonic()

    async def scenario() -> None:
        profile = FaultProfile(outage_windows=((10, 20), (30, 31)))
        async with simulator(tmp_path, profile, monotonic=monotonic) as client:
            seen = []
            for elapsed in (0, 9.9, 10, 19.9, 20, 30.5, 31):
                monotonic.now = 1000.0 + elapsed
                seen.append((await call(client, "inventory/release", f"k-{elapsed}"))[0])
            assert seen == [200, 200, 503, 503, 200, 503, 200]

    run(scenario())


def test_bad_requests(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path) as client:
            status, body, _ = await call(client, "inventory/reserve", None)
            assert status == 400
            assert "Idempotency-Key" in body["error"]
            status, body, _ = await call(client, "inventory/reserve", "order-1:x", [1, 2])
            assert (status, list(body)) == (400, ["error"])
            headers = {"Idempotency-Key": "order-2:x"}
            async with client.post("/inventory/reserve", data=b"{not json", headers=headers) as response:
                assert response.status == 400
            assert await outcomes(client, "order-1:x") == ["invalid"]
            assert await outcomes(client, "order-2:x") == ["invalid"]
            assert await effects(client, "order-1:x") == []
            assert await effects(client, "order-2:x") == []
            # A call without a key cannot be filed under one; it leaves no trace.
            assert sorted((await get(client, "/ledger"))["keys"]) == ["order-1:x", "order-2:x"]

    run(scenario())


def test_ledger_read_api(tmp_path: Path) -> None:
    clock = StepClock()

    def at(seconds: int) -> str:
        return f"2026-01-01T12:00:{seconds:02d}.000000Z"

    async def scenario() -> None:
        async with simulator(tmp_path, clock=clock) as client:
            await call(client, "inventory/reserve", "order-1:ReserveInventory")  # call 0, effect 1
            await call(client, "inventory/reserve", "order-1:ReserveInventory")  # call 2
            await call(client, "payments/charge", "order-1:ChargePayment")  # call 3, effect 4
            await call(client, "inventory/reserve", "order-2:ReserveInventory")  # call 5, effect 6
            history = await get(client, "/ledger/order-1:ReserveInventory")
            assert history["key"] == "order-1:ReserveInventory"
            assert [(c["at"], c["operation"], c["outcome"]) for c in history["calls"]] == [
                (at(0), "inventory/reserve", "ok"),
                (at(2), "inventory/reserve", "replayed"),
            ]
            assert [(e["at"], e["operation"]) for e in history["effects"]] == [(at(1), "inventory/reserve")]
            assert await get(client, "/ledger/nobody:Step") == {
                "key": "nobody:Step",
                "calls": [],
                "effects": [],
            }
            assert await get(client, "/ledger?prefix=order-1:") == {
                "keys": {
                    "order-1:ChargePayment": {
                        "calls": 1,
                        "effects": 1,
                        "first_call": at(3),
                        "last_call": at(3),
                    },
                    "order-1:ReserveInventory": {
                        "calls": 2,
                        "effects": 1,
                        "first_call": at(0),
                        "last_call": at(2),
                    },
                }
            }
            assert len((await get(client, "/ledger"))["keys"]) == 3
            assert await get(client, "/ledger?prefix=order-9") == {"keys": {}}

    run(scenario())


def test_concurrent_calls_with_one_key_apply_one_effect(tmp_path: Path) -> None:
    async def scenario() -> None:
        # Latency makes the calls overlap inside the service, not just on the wire.
        async with simulator(tmp_path, FaultProfile(latency_ms=(1, 5), seed=1)) as client:
            answers = await asyncio.gather(
                *(call(client, "payments/charge", "order-1:ChargePayment") for _ in range(20))
            )
            assert {status for status, _, _ in answers} == {200}
            assert len({json.dumps(result) for _, result, _ in answers}) == 1
            assert len(await effects(client, "order-1:ChargePayment")) == 1
            seen = await outcomes(client, "order-1:ChargePayment")
            assert sorted(seen) == ["ok"] + ["replayed"] * 19

    run(scenario())


def test_racing_ledgers_on_one_file_store_one_effect(tmp_path: Path) -> None:
    first, second = Ledger(tmp_path / "l.db"), Ledger(tmp_path / "l.db")
    try:
        mine = first.apply_effect("k", "payments/charge", {"PaymentId": "pay-1"}, T0)
        theirs = second.apply_effect("k", "payments/charge", {"PaymentId": "pay-2"}, T0)
        assert mine == ({"PaymentId": "pay-1"}, True)
        assert theirs == ({"PaymentId": "pay-1"}, False)
        assert len(first.history("k")["effects"]) == 1
    finally:
        first.close()
        second.close()


def test_hang_outlasts_a_short_client_timeout(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path, FaultProfile(hang_rate=1, hang_seconds=30)) as client:
            with pytest.raises(TimeoutError):
                async with client.post(
                    "/inventory/reserve",
                    json={},
                    headers={"Idempotency-Key": "order-1:ReserveInventory"},
                    timeout=aiohttp.ClientTimeout(total=0.2),
                ):
                    pass
            assert await outcomes(client, "order-1:ReserveInventory") == ["hang"]
            assert await effects(client, "order-1:ReserveInventory") == []
        # Leaving the block stopped the server without waiting out the 30-second hang.

    started = time.monotonic()
    run(scenario())
    assert time.monotonic() - started < 10


def test_a_hang_that_ends_still_serves(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path, FaultProfile(hang_rate=1, hang_seconds=0.01)) as client:
            assert (await call(client, "inventory/reserve", "order-1:ReserveInventory"))[0] == 200
            assert await outcomes(client, "order-1:ReserveInventory") == ["hang+ok"]

    run(scenario())


def test_profile_validation_and_merge(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path, FaultProfile(transient_rate=0.25)) as client:
            for bad, reason in (
                ({"transient_rate": 2}, "transient_rate"),
                ({"latency_ms": [50, 10]}, "latency_ms"),
                ({"outage_windows": [[5, 1]]}, "outage_windows"),
                ({"hang_seconds": -1}, "hang_seconds"),
                ({"no_such_fault": 1}, "no_such_fault"),
                ([1], "JSON object"),
            ):
                status, body = await put_profile(client, bad)
                assert status == 400, bad
                assert reason in body["error"]
            assert (await get(client, "/admin/profile"))["transient_rate"] == 0.25
            status, merged = await put_profile(client, {"latency_ms": [1, 2], "outage_windows": [[0, 1]]})
            assert status == 200
            assert merged == await get(client, "/admin/profile")
            assert merged["transient_rate"] == 0.25
            assert merged["latency_ms"] == [1, 2]
            assert merged["outage_windows"] == [[0, 1]]
            assert await get(client, "/health") == {"ok": True}

    run(scenario())


def test_a_seed_makes_faults_repeatable(tmp_path: Path) -> None:
    async def sequence(directory: Path) -> list[int]:
        directory.mkdir()
        profile = FaultProfile(transient_rate=0.5, permanent_rate=0.3, seed=42)
        async with simulator(directory, profile) as client:
            return [(await call(client, "payments/charge", f"order-{i}:ChargePayment"))[0] for i in range(40)]

    first, second = run(sequence(tmp_path / "a")), run(sequence(tmp_path / "b"))
    assert first == second
    assert {200, 422, 503} <= set(first)


def test_reseeding_at_run_time(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with simulator(tmp_path, FaultProfile(transient_rate=0.5)) as client:
            runs = []
            for attempt in range(2):
                await put_profile(client, {"seed": 7})
                runs.append([(await call(client, "payments/charge", f"{attempt}-{i}"))[0] for i in range(20)])
            assert runs[0] == runs[1]
            assert client.app is not None
            assert client.app[SIMULATOR].profile.seed == 7

    run(scenario())


def test_load_profile_from_json_or_file(tmp_path: Path) -> None:
    assert load_profile('{"transient_rate": 0.1}') == FaultProfile(transient_rate=0.1)
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"outage_windows": [[1, 2]], "seed": 5}))
    assert load_profile(str(path)) == FaultProfile(outage_windows=((1, 2),), seed=5)
    with pytest.raises(ValueError, match="permanent_rate"):
        load_profile('{"permanent_rate": -1}')


def test_cli_rejects_a_bad_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--profile", '{"lost_response_rate": 7}']) == 2
    assert "lost_response_rate" in capsys.readouterr().err


def _request(url: str, *, body: object = None, headers: dict[str, str] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


@pytest.mark.processes  # python -m simulator
def test_cli_serves_until_sigterm(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "simulator", "--port", str(port), "--ledger", str(tmp_path / "cli.db")],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                assert _request(f"{base}/health") == {"ok": True}
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, "the simulator did not answer /health in time"
            # Waiting on the process both paces the polling and catches an early exit.
            with pytest.raises(subprocess.TimeoutExpired):
                process.wait(timeout=0.05)
        result = _request(
            f"{base}/payments/charge", body={"Amount": "1"}, headers={"Idempotency-Key": "cli:1"}
        )
        assert set(result) == {"PaymentId"}
        assert _request(f"{base}/ledger/cli:1")["effects"][0]["result"] == result
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert f"Simulator listening on http://127.0.0.1:{port}" in stdout
    assert (tmp_path / "cli.db").exists()
