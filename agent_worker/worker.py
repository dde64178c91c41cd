"""The agent's work loop: receive a request, call the remote service within its deadline and
attempt limit, reply, complete.

Per request (R3, R4, C2):
- a malformed request is dead-lettered with the validation error;
- a request whose CompleteBy has passed starts no call: it is completed and logged;
- calls carry the request's idempotency key; transient faults are retried with exponential
  backoff and jitter (or the service's Retry-After), never starting a call at or after
  CompleteBy and never more than MaxAttempts calls; permanent faults are not retried;
- each remote service sits behind a circuit breaker: while it is open, attempts fail fast;
- the message lock is renewed while the work runs;
- the reply goes out with MessageId ``<RequestID>:reply`` before the request is completed, so a
  crash in between re-sends the same reply, which duplicate detection drops.
"""

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from purgatory import AsyncCircuitBreakerFactory
from purgatory.domain.model import OpenedState
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.stop import stop_base
from tenacity.wait import wait_base, wait_exponential_jitter

from adapters.servicebus.agent_queues import AgentMessaging
from adapters.servicebus.messages import MessageLockLost, ReceivedMessage
from agent_worker.remote import PermanentFailure, RemoteService, TransientFailure, endpoint_for
from agent_worker.settings import AgentSettings
from domain.messages import AgentOutcome, AgentReply, AgentRequest, InvalidMessage, parse_message
from services import telemetry

log = logging.getLogger("agent")


class DeadlineReached(Exception):
    """CompleteBy has passed: no new call may start (R4)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class _StopBeforeDeadline(stop_base):
    """Stop retrying when the next attempt would start at or after the deadline."""

    def __init__(self, deadline: datetime, clock: Callable[[], datetime]) -> None:
        self.deadline = deadline
        self.clock = clock

    def __call__(self, retry_state: RetryCallState) -> bool:
        wait = retry_state.upcoming_sleep or 0.0
        return (self.deadline - self.clock()).total_seconds() <= wait


class _BackoffOrRetryAfter(wait_base):
    """Exponential backoff with jitter, or longer when the service said Retry-After."""

    def __init__(self, backoff: wait_base) -> None:
        self.backoff = backoff

    def __call__(self, retry_state: RetryCallState) -> float:
        delay = float(self.backoff(retry_state))
        error = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(error, TransientFailure) and error.retry_after is not None:
            delay = max(delay, error.retry_after)
        return delay


@dataclass
class Stats:
    received: int = 0
    replied: dict[str, int] = field(default_factory=dict)
    expired: int = 0
    dead_lettered: int = 0
    calls: int = 0
    breaker_rejections: int = 0


class Agent:
    def __init__(
        self,
        settings: AgentSettings,
        messaging: AgentMessaging,
        remote: RemoteService,
        *,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.settings = settings
        self.messaging = messaging
        self.remote = remote
        self.clock = clock
        self.breakers = AsyncCircuitBreakerFactory(
            default_threshold=settings.breaker_failures,
            default_ttl=settings.breaker_recovery_seconds,
            exclude=[PermanentFailure],  # a business refusal says nothing about the service's health
        )
        self.stats = Stats()
        self._stopping = asyncio.Event()

    # --- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until ``stop()``; then finish in-flight work within the grace period, abandon the rest."""
        workers = [asyncio.create_task(self._worker()) for _ in range(self.settings.concurrency)]
        await self._stopping.wait()
        _, pending = await asyncio.wait(workers, timeout=self.settings.shutdown_grace_seconds)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.remote.close()

    def stop(self) -> None:
        self._stopping.set()

    async def _worker(self) -> None:
        while not self._stopping.is_set():
            try:
                handled = await self.poll_once(1)
            except Exception:  # the queue itself failed: keep this worker alive, back off
                log.exception("receiving requests failed; retrying")
                handled = 0
            if not handled:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.settings.poll_interval_seconds)

    async def poll_once(self, max_messages: int) -> int:
        messages = await self.messaging.receive(max_messages)
        for message in messages:
            try:
                await self.handle(message)
            except asyncio.CancelledError:
                # Shutting down mid-request: give the message back for another agent.
                with contextlib.suppress(MessageLockLost):
                    await asyncio.shield(self.messaging.abandon(message))
                raise
            except Exception:  # e.g. the reply could not be sent: let the request come back
                log.exception("request %s failed; abandoning it for redelivery", message.message_id)
                with contextlib.suppress(MessageLockLost):
                    await self.messaging.abandon(message)
        return len(messages)

    # --- one request -------------------------------------------------------------------------

    async def handle(self, message: ReceivedMessage) -> None:
        self.stats.received += 1
        try:
            request = parse_message(AgentRequest, message.body)
        except InvalidMessage as invalid:
            self.stats.dead_lettered += 1
            log.warning("dead-lettering request %s: %s", message.message_id, invalid)
            await self.messaging.dead_letter(message, invalid.reason, invalid.description)
            return
        if self.clock() >= request.CompleteBy:
            self.stats.expired += 1
            log.info("request %s arrived after its CompleteBy: no call (R4)", request.RequestID)
            await self.messaging.complete(message)
            return
        renewer = asyncio.create_task(self._keep_lock(message))
        try:
            with telemetry.order_span(
                "agent.request",
                request.OrderID,
                request.InstanceID,
                step=request.Step,
                delivery=message.delivery_count,
            ) as span:
                reply = await self.perform(request)
                span.set_attribute("sas.outcome", reply.Outcome.value)
                span.set_attribute("sas.attempts", reply.Attempts)
        finally:
            renewer.cancel()
            # A renewer that failed must not throw the finished call away.
            await asyncio.gather(renewer, return_exceptions=True)
        await self.messaging.reply(
            reply.model_dump_json(), message_id=f"{request.RequestID}:reply", correlation_id=request.OrderID
        )
        self.stats.replied[reply.Outcome.value] = self.stats.replied.get(reply.Outcome.value, 0) + 1
        try:
            await self.messaging.complete(message)
        except MessageLockLost:
            log.warning(
                "lock lost on %s after replying: the redelivery re-sends the same reply", request.RequestID
            )

    async def _keep_lock(self, message: ReceivedMessage) -> None:
        while True:
            remaining = (message.locked_until - self.clock()).total_seconds()
            # A third of the way: room for two late renewals before the lock runs out.
            await asyncio.sleep(max(remaining / 3, 0.05))
            try:
                locked_until = await self.messaging.renew_lock(message)
            except MessageLockLost:
                log.warning("could not renew the lock on %s", message.message_id)
                return
            except Exception:  # a passing broker error: try again soon, the lock may still hold
                log.exception("renewing the lock on %s failed; retrying", message.message_id)
                await asyncio.sleep(1)
                continue
            message = _with_lock(message, locked_until)

    async def perform(self, request: AgentRequest) -> AgentReply:
        attempts = 0
        try:
            endpoint = endpoint_for(request.Step)
        except PermanentFailure as unknown:
            return _reply(request, AgentOutcome.PERMANENT, error=str(unknown), attempts=0)

        async def attempt() -> dict[str, object]:
            nonlocal attempts
            if self.clock() >= request.CompleteBy:
                raise DeadlineReached(f"CompleteBy {request.CompleteBy.isoformat()} has passed")
            attempts += 1
            if attempts > 1:
                telemetry.agent_retries.add(1, {"step": request.Step})
            try:
                async with await self.breakers.get_breaker(endpoint.service):
                    self.stats.calls += 1
                    with telemetry.order_span(
                        "agent.call", request.OrderID, request.InstanceID, attempt=attempts
                    ):
                        result = await self.remote.call(endpoint, request.IdempotencyKey, request.Payload)
                    telemetry.agent_calls.add(1, {"step": request.Step, "outcome": "ok"})
                    return result
            except OpenedState as opened:
                self.stats.breaker_rejections += 1
                telemetry.breaker_rejections.add(1, {"service": endpoint.service})
                raise TransientFailure(f"circuit open: {opened}") from opened
            except (TransientFailure, PermanentFailure) as failed:
                outcome = "transient" if isinstance(failed, TransientFailure) else "permanent"
                telemetry.agent_calls.add(1, {"step": request.Step, "outcome": outcome})
                raise

        retrying = AsyncRetrying(
            stop=stop_after_attempt(request.MaxAttempts)
            | _StopBeforeDeadline(request.CompleteBy, self.clock),
            wait=_BackoffOrRetryAfter(
                wait_exponential_jitter(
                    multiplier=self.settings.backoff_initial_seconds, max=self.settings.backoff_max_seconds
                )
            ),
            retry=retry_if_exception_type(TransientFailure),
            reraise=True,
        )
        try:
            result: dict[str, object] = await retrying(attempt)
        except PermanentFailure as refused:
            return _reply(request, AgentOutcome.PERMANENT, error=str(refused), attempts=attempts)
        except (TransientFailure, DeadlineReached) as gave_up:
            error = f"{type(gave_up).__name__} after {attempts} attempt(s): {gave_up}"
            return _reply(request, AgentOutcome.TRANSIENT_EXHAUSTED, error=error, attempts=attempts)
        return _reply(request, AgentOutcome.OK, result=result, attempts=attempts)


def _reply(
    request: AgentRequest,
    outcome: AgentOutcome,
    *,
    attempts: int,
    result: dict[str, object] | None = None,
    error: str | None = None,
) -> AgentReply:
    return AgentReply(
        RequestID=request.RequestID,
        InstanceID=request.InstanceID,
        Step=request.Step,
        Outcome=outcome,
        Result=result,
        Error=None if error is None else error[:2000],
        Attempts=attempts,
    )


def _with_lock(message: ReceivedMessage, locked_until: datetime) -> ReceivedMessage:
    return replace(message, locked_until=locked_until)
