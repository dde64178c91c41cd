"""The HTTP face of the simulated remote service: four operations, the ledger, the fault profile.

Per call, in this order: record the call (its time taken at the start) → outage → transient
fault → hang → latency → replay of a stored result → permanent refusal → apply the effect →
lost response. Infrastructure faults come before the service logic, so they hit replays too;
a refusal only ever hits a key with no effect yet. A call that hung and then finished is
recorded as ``hang+<outcome>``, so a judge sees both that the client timed out and what the
service did anyway.
"""

import asyncio
import hashlib
import json
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from simulator.callers import CallerCheck, middleware
from simulator.ledger import Ledger
from simulator.profile import FaultProfile

Clock = Callable[[], datetime]
Monotonic = Callable[[], float]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# The operation (its path) → the result's field and the prefix of its id.
OPERATIONS: dict[str, tuple[str, str]] = {
    "inventory/reserve": ("ReservationId", "res"),
    "inventory/release": ("ReleaseId", "rel"),
    "payments/charge": ("PaymentId", "pay"),
    "payments/refund": ("RefundId", "ref"),
}
IDEMPOTENCY_HEADER = "Idempotency-Key"
# The undo operations. The Scheduler undoes every step whose request went out, refused or not,
# and names the forward call's idempotency key in the body's ``Undoes``: an undo of a call that
# never took effect has nothing to undo, and succeeds without an effect (nor is it stored, so an
# undo repeated after the forward call did land undoes it then).
UNDOS = frozenset({"inventory/release", "payments/refund"})
UNDOES_FIELD = "Undoes"
_THROTTLED_SHARE = 1 / 3


def utc_now() -> datetime:
    return datetime.now(UTC)


class Simulator:
    """The service's state: the ledger, the live profile and the RNG its faults roll with."""

    def __init__(self, ledger: Ledger, profile: FaultProfile, clock: Clock, monotonic: Monotonic) -> None:
        self.ledger = ledger
        self.profile = profile
        self.rng = random.Random(profile.seed)
        self._clock = clock
        self._monotonic = monotonic
        self._started = monotonic()
        # Set at shutdown, so hangs end at once instead of holding the server's graceful stop.
        self._stopping = asyncio.Event()

    def mark_started(self) -> None:
        self._started = self._monotonic()

    def stop(self) -> None:
        self._stopping.set()

    def operation(self, operation: str) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._call(operation, request)

        return handle

    async def _call(self, operation: str, request: web.Request) -> web.StreamResponse:
        at = self._clock()
        key = request.headers.get(IDEMPOTENCY_HEADER, "").strip()
        if not key:
            return _error(400, f"missing {IDEMPOTENCY_HEADER} header")
        body = await _json_object(request)
        call_id = self.ledger.record_call(key, operation, at, body)
        if body is None:
            return self._finish(call_id, "invalid", _error(400, "the body must be a JSON object"))
        profile = self.profile
        fault = self._infrastructure_fault(profile)
        if fault is not None:
            return self._finish(call_id, *fault)
        hung = self._roll(profile.hang_rate)
        if hung:
            self.ledger.set_outcome(call_id, "hang")
        if not await self._pause((profile.hang_seconds if hung else 0.0) + self._latency(profile)):
            return self._finish(call_id, "hang" if hung else "aborted", _drop(request))
        outcome, response = self._serve(key, operation, profile, request, body)
        return self._finish(call_id, f"hang+{outcome}" if hung else outcome, response)

    def _infrastructure_fault(self, profile: FaultProfile) -> tuple[str, web.StreamResponse] | None:
        if profile.in_outage(self._monotonic() - self._started):
            return "outage", _error(503, "service unavailable (simulated outage)")
        if not self._roll(profile.transient_rate):
            return None
        if self.rng.random() < _THROTTLED_SHARE:
            return "transient", _error(429, "too many requests (simulated)", {"Retry-After": "1"})
        return "transient", _error(503, "service unavailable (simulated transient fault)")

    def _serve(
        self, key: str, operation: str, profile: FaultProfile, request: web.Request, body: dict[str, Any]
    ) -> tuple[str, web.StreamResponse]:
        stored = self.ledger.effect(key)
        if stored is not None:
            if profile.broken_idempotency:
                self.ledger.apply_again(key)
            return "replayed", web.json_response(stored)
        if self._roll(profile.permanent_rate):
            return "permanent", _error(422, f"{operation} refused for {key} (simulated business refusal)")
        undoes = body.get(UNDOES_FIELD) if operation in UNDOS else None
        if isinstance(undoes, str) and self.ledger.effect(undoes) is None:
            return "noop", web.json_response(_result(operation, key) | {"Noop": True})
        result, applied = self.ledger.apply_effect(key, operation, _result(operation, key), self._clock())
        if not applied:
            return "replayed", web.json_response(result)
        if self._roll(profile.lost_response_rate):
            return "lost", _drop(request)
        return "ok", web.json_response(result)

    def _finish(self, call_id: int, outcome: str, response: web.StreamResponse) -> web.StreamResponse:
        self.ledger.set_outcome(call_id, outcome)
        return response

    def _roll(self, rate: float) -> bool:
        # No draw at rate 0, so a seeded run's sequence depends only on the faults switched on.
        return rate > 0 and self.rng.random() < rate

    def _latency(self, profile: FaultProfile) -> float:
        low, high = profile.latency_ms
        return 0.0 if high <= 0 else self.rng.uniform(low, high) / 1000

    async def _pause(self, seconds: float) -> bool:
        """Wait ``seconds``; False when the simulator is stopping and the call should be dropped."""
        if seconds <= 0:
            return True
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            return True
        return False

    async def get_profile(self, _: web.Request) -> web.Response:
        return web.json_response(self.profile.to_json())

    async def put_profile(self, request: web.Request) -> web.Response:
        changes = await _json_object(request)
        if changes is None:
            return _error(400, "the profile must be a JSON object")
        try:
            profile = self.profile.merged(changes)
        except ValidationError as error:
            reasons = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            return _error(400, f"invalid profile: {reasons}")
        self.profile = profile
        if changes.get("seed") is not None:
            self.rng.seed(profile.seed)
        return web.json_response(profile.to_json())

    async def get_ledger_key(self, request: web.Request) -> web.Response:
        return web.json_response(self.ledger.history(request.match_info["key"]))

    async def get_ledger(self, request: web.Request) -> web.Response:
        return web.json_response({"keys": self.ledger.summary(request.query.get("prefix", ""))})


SIMULATOR = web.AppKey("simulator", Simulator)


def create_app(
    ledger_path: Path | str,
    profile: FaultProfile | None = None,
    *,
    clock: Clock = utc_now,
    monotonic: Monotonic = time.monotonic,
    callers: CallerCheck | None = None,
) -> web.Application:
    """The service as an aiohttp app; ``clock`` stamps the ledger, ``monotonic`` drives outage windows,
    ``callers`` (simulator/callers.py) admits only the agent's token when given."""
    simulator = Simulator(Ledger(ledger_path), profile or FaultProfile(), clock, monotonic)
    app = web.Application(middlewares=[middleware(callers)] if callers is not None else [])
    app[SIMULATOR] = simulator
    for operation in OPERATIONS:
        app.router.add_post(f"/{operation}", simulator.operation(operation))
    app.router.add_get("/ledger", simulator.get_ledger)
    app.router.add_get("/ledger/{key:.+}", simulator.get_ledger_key)
    app.router.add_get("/admin/profile", simulator.get_profile)
    app.router.add_put("/admin/profile", simulator.put_profile)
    app.router.add_get("/health", _health)

    async def on_startup(_: web.Application) -> None:
        simulator.mark_started()

    async def on_shutdown(_: web.Application) -> None:
        simulator.stop()

    async def on_cleanup(_: web.Application) -> None:
        simulator.ledger.close()

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.on_cleanup.append(on_cleanup)
    return app


async def _health(_: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def _json_object(request: web.Request) -> dict[str, Any] | None:
    try:
        value = json.loads(await request.read())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _result(operation: str, key: str) -> dict[str, Any]:
    field, prefix = OPERATIONS[operation]
    return {field: f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"}


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


def _drop(request: web.Request) -> web.StreamResponse:
    """Close the connection so the client gets no response at all.

    Writing the returned response then fails with a connection error, which aiohttp treats as
    a client that went away: no log, no retry.
    """
    if request.transport is not None:
        request.transport.close()
    return web.Response()
