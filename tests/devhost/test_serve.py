"""``serve()`` on the real clock wakes on work, not on a poll interval.

Each host here waits an hour when idle (``idle_wait``): a message handled within the test's
timeout was handled because something woke the trigger loop, a commit to the bus file or the
message coming due, never because the fallback wait ran out.
"""

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import ReceivedMessage
from harness.devhost.clock import SystemClock
from tests.support.devhost_sample import Sample, make_sample

AN_HOUR = 3600.0
# Far below AN_HOUR: what passes within it was not left to the fallback wait.
TIMEOUT = 30.0


class Watched:
    """The serving host's trigger loop, seen through its bus: when a receive came back empty
    (the loop is about to wait) and when a message was completed (its function ran)."""

    def __init__(self, sample: Sample, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sample = sample
        self.found_nothing = asyncio.Event()
        self.completed = asyncio.Event()
        bus = sample.host.servicebus
        receive, complete = bus.receive, bus.complete

        # Both run on the host's pool threads: the events are set on the loop's own thread.
        def notify(event: asyncio.Event) -> None:
            sample.loop.call_soon_threadsafe(event.set)

        def receiving(queue: str, max_messages: int) -> list[ReceivedMessage]:
            messages = receive(queue, max_messages)
            if not messages:
                notify(self.found_nothing)
            return messages

        def completing(message: ReceivedMessage) -> None:
            complete(message)
            notify(self.completed)

        monkeypatch.setattr(bus, "receive", receiving)
        monkeypatch.setattr(bus, "complete", completing)

    def serve_until_completed(self, send: Callable[[LocalServiceBus], object]) -> None:
        """Serve; once the trigger loop has found its queue empty, ``send`` on a connection of
        its own (as the app's worker or an agent would); return when the message is completed."""

        async def scenario() -> None:
            serving = asyncio.create_task(self.sample.host.serve())
            try:
                await asyncio.wait_for(self.found_nothing.wait(), TIMEOUT)
                with LocalServiceBus(self.sample.host.config.servicebus_path) as sender:
                    send(sender)
                await asyncio.wait_for(self.completed.wait(), TIMEOUT)
            finally:
                serving.cancel()
                await asyncio.gather(serving, return_exceptions=True)

        self.sample.run(scenario())


@pytest.fixture
def serving(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Watched]:
    sample = make_sample(loop, tmp_path, monkeypatch, SystemClock(), idle_wait=AN_HOUR)
    try:
        yield Watched(sample, monkeypatch)
    finally:
        loop.run_until_complete(sample.host.stop())


def test_a_sent_message_wakes_the_idle_trigger_loop(serving: Watched) -> None:
    serving.serve_until_completed(lambda bus: bus.send("work", json.dumps({"id": "sent"})))
    assert [r["id"] for r in serving.sample.records("work")] == ["sent"]


def test_a_scheduled_message_wakes_the_trigger_loop_when_it_comes_due(serving: Watched) -> None:
    # The send's commit finds nothing receivable yet; only the due time can wake the loop again.
    due: list[datetime] = []

    def send_for_later(bus: LocalServiceBus) -> None:
        due.append(datetime.now(UTC) + timedelta(milliseconds=200))
        bus.send("work", json.dumps({"id": "due"}), scheduled_enqueue_time=due[0])

    serving.serve_until_completed(send_for_later)
    assert [r["id"] for r in serving.sample.records("work")] == ["due"]
    assert datetime.now(UTC) >= due[0]
