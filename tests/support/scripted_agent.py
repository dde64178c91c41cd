"""The agent double of the app's tests: an ExtraSource for devhost's host that answers each
request as its script says — ok, permanent error, transient exhaustion, silence, twice, or late —
and keeps an effects ledger keyed by idempotency key, the way a remote service de-duplicates (R3),
so tests can check exactly-once effects."""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import ReceivedMessage
from domain.messages import AgentOutcome, AgentReply, AgentRequest
from harness.devhost.clock import VirtualClock


@dataclass(frozen=True)
class Answer:
    outcome: str  # "ok" | "permanent" | "transient" | "silent"
    copies: int = 1
    delay: timedelta = timedelta(0)


OK = Answer("ok")
Script = Callable[[AgentRequest, int], Answer]  # (request, how many times this action was asked)


@dataclass
class ScriptedAgent:
    """An ExtraSource for the host: reads agent requests, replies per script, records effects."""

    bus: LocalServiceBus
    clock: VirtualClock
    script: Script = lambda request, n: OK
    requests_queue: str = "agent-requests"
    replies_queue: str = "agent-replies"
    asked: Counter[str] = field(default_factory=Counter)  # by action (Step)
    effects: Counter[str] = field(default_factory=Counter)  # by idempotency key
    calls: Counter[str] = field(default_factory=Counter)  # remote calls, by idempotency key
    delayed: list[tuple[datetime, AgentReply]] = field(default_factory=list)
    requests: list[AgentRequest] = field(default_factory=list)

    def step(self) -> int:
        handled = 0
        now = self.clock.now()
        due = [reply for at, reply in self.delayed if at <= now]
        self.delayed = [(at, reply) for at, reply in self.delayed if at > now]
        for reply in due:
            self._send(reply)
            handled += 1
        for message in self.bus.receive(self.requests_queue, 16):
            self._answer(message)
            self.bus.complete(message)
            handled += 1
        return handled

    def next_due(self) -> datetime | None:
        return min((at for at, _ in self.delayed), default=None)

    def _answer(self, message: ReceivedMessage) -> None:
        request = AgentRequest.model_validate_json(message.body)
        self.requests.append(request)
        self.asked[request.Step] += 1
        answer = self.script(request, self.asked[request.Step])
        if answer.outcome == "silent":
            return
        if self.effects[request.IdempotencyKey] and answer.outcome in ("permanent", "transient"):
            # R3: the service de-duplicates by idempotency key; a repeat of a call that already
            # took effect gets the original success back, whatever else is going wrong.
            answer = Answer("ok", answer.copies, answer.delay)
        if answer.outcome == "ok":
            self.calls[request.IdempotencyKey] += 1
            # The remote service de-duplicates by idempotency key: one effect however often called.
            if self.effects[request.IdempotencyKey] == 0:
                self.effects[request.IdempotencyKey] = 1
            reply = AgentReply(
                RequestID=request.RequestID,
                InstanceID=request.InstanceID,
                Step=request.Step,
                Outcome=AgentOutcome.OK,
                Result={f"{request.Step}Id": f"ref-{request.IdempotencyKey}"},
                Attempts=1,
            )
        else:
            self.calls[request.IdempotencyKey] += 1
            outcome = (
                AgentOutcome.PERMANENT if answer.outcome == "permanent" else AgentOutcome.TRANSIENT_EXHAUSTED
            )
            reply = AgentReply(
                RequestID=request.RequestID,
                InstanceID=request.InstanceID,
                Step=request.Step,
                Outcome=outcome,
                Error=f"{request.Step} said {answer.outcome}",
                Attempts=1,
            )
        for copy in range(answer.copies):
            if answer.delay:
                self.delayed.append((self.clock.now() + answer.delay, reply))
            else:
                self._send(reply, copy)

    def _send(self, reply: AgentReply, copy: int = 0) -> None:
        # A re-sent copy keeps its MessageId (duplicate detection drops it); "twice" tests the
        # listener too, so extra copies get their own ids.
        suffix = "" if copy == 0 else f":copy{copy}"
        self.bus.send(
            self.replies_queue, reply.model_dump_json(), message_id=f"{reply.RequestID}:reply{suffix}"
        )

    def net_effect(self, order_id: str, action: str) -> int:
        return self.effects[f"{order_id}:{action}"]
