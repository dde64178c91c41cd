"""The local Service Bus behaves like an Azure Service Bus queue in peek-lock mode.

Time only moves when a test moves the fake clock, so lock expiry, scheduling and duplicate
windows are tested without sleeping.
"""

import multiprocessing
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.servicebus.local_bus import SCHEMA, LocalServiceBus
from adapters.servicebus.messages import (
    MAX_DELIVERY_COUNT_EXCEEDED,
    NOT_LOCKED,
    MessageLockLost,
    QueueConfig,
    QueueNotFound,
    ReceivedMessage,
    dead_letter_queue,
)
from domain.timestamps import format_ts
from harness.devhost.config import queues_from_emulator_config
from settings import SettingsError
from tests.support.broker import write_config

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LOCK = timedelta(seconds=30)


class FakeClock:
    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def bus(tmp_path: Path, clock: FakeClock) -> Iterator[LocalServiceBus]:
    queues = [
        QueueConfig("orders", max_delivery_count=3, lock_duration=LOCK),
        QueueConfig("nodedup", duplicate_detection_window=None),
    ]
    with LocalServiceBus(tmp_path / "bus.db", queues, clock=clock) as bus:
        yield bus


def receive_one(bus: LocalServiceBus, queue: str = "orders") -> ReceivedMessage:
    messages = bus.receive(queue)
    assert len(messages) == 1
    return messages[0]


def test_send_receive_complete(bus: LocalServiceBus, clock: FakeClock) -> None:
    assert bus.send("orders", "hello", message_id="m-1", content_type="text/plain", subject="greeting")

    message = receive_one(bus)

    assert message.queue == "orders"
    assert message.message_id == "m-1"
    assert message.body == b"hello"
    assert message.content_type == "text/plain"
    assert message.subject == "greeting"
    assert message.delivery_count == 1
    assert message.enqueued_time == T0
    assert message.locked_until == T0 + LOCK
    assert message.dead_letter_reason is None
    bus.complete(message)
    assert bus.receive("orders") == []
    assert bus.peek("orders") == []
    clock.advance(LOCK * 2)
    assert bus.receive("orders") == []


def test_messages_are_received_in_send_order(bus: LocalServiceBus) -> None:
    for index in range(5):
        bus.send("orders", f"body-{index}".encode(), message_id=f"m-{index}")

    first = bus.receive("orders", max_messages=3)
    rest = bus.receive("orders", max_messages=10)

    assert [m.message_id for m in first + rest] == [f"m-{i}" for i in range(5)]
    sequence_numbers = [m.sequence_number for m in first + rest]
    assert sequence_numbers == sorted(sequence_numbers)


def test_a_locked_message_is_hidden_until_its_lock_expires_then_redelivered(
    tmp_path: Path, bus: LocalServiceBus, clock: FakeClock
) -> None:
    bus.send("orders", b"x", message_id="m-1")
    first = receive_one(bus)
    # A second receiver on the same file sees nothing while the lock holds.
    with LocalServiceBus(tmp_path / "bus.db", clock=clock) as other:
        assert other.receive("orders") == []
        clock.advance(LOCK - timedelta(microseconds=1))
        assert other.receive("orders") == []
        clock.advance(timedelta(microseconds=1))

        second = other.receive("orders")[0]

    assert second.message_id == "m-1"
    assert second.delivery_count == 2
    assert second.lock_token != first.lock_token
    with pytest.raises(MessageLockLost):
        bus.complete(first)
    bus.complete(second)
    assert bus.counts("orders") == {"active": 0, "scheduled": 0, "locked": 0, "dead_letter": 0}


def test_settling_after_the_lock_expired_raises_lock_lost(bus: LocalServiceBus, clock: FakeClock) -> None:
    bus.send("orders", b"x")
    message = receive_one(bus)
    clock.advance(LOCK)

    for settle in (bus.complete, bus.abandon, bus.renew_lock):
        with pytest.raises(MessageLockLost):
            settle(message)
    with pytest.raises(MessageLockLost):
        bus.dead_letter(message, "Poison")


def test_abandon_makes_the_message_receivable_at_once(bus: LocalServiceBus) -> None:
    bus.send("orders", b"x", message_id="m-1")
    first = receive_one(bus)

    bus.abandon(first)

    again = receive_one(bus)
    assert again.message_id == "m-1"
    assert again.delivery_count == 2
    with pytest.raises(MessageLockLost):
        bus.abandon(first)


def test_renew_lock_extends_the_lock(bus: LocalServiceBus, clock: FakeClock) -> None:
    bus.send("orders", b"x")
    message = receive_one(bus)
    clock.advance(timedelta(seconds=20))

    locked_until = bus.renew_lock(message)

    assert locked_until == clock.now + LOCK
    clock.advance(timedelta(seconds=20))  # past the first lock's expiry, inside the renewed one
    assert bus.receive("orders") == []
    assert bus.counts("orders")["locked"] == 1
    bus.complete(message)


def test_renew_keeps_the_lock_duration_the_message_was_received_with(
    bus: LocalServiceBus, clock: FakeClock
) -> None:
    bus.send("orders", b"x")
    message = bus.receive("orders", lock_duration=timedelta(minutes=5))[0]
    assert message.locked_until == T0 + timedelta(minutes=5)

    assert bus.renew_lock(message) == T0 + timedelta(minutes=5)


def test_a_message_that_always_fails_is_dead_lettered_after_max_delivery_count(
    bus: LocalServiceBus, clock: FakeClock
) -> None:
    bus.send("orders", b"poison", message_id="poison", correlation_id="c-1")
    deliveries = 0
    while messages := bus.receive("orders"):
        deliveries += 1
        assert messages[0].delivery_count == deliveries
        bus.abandon(messages[0])

    assert deliveries == 3
    assert bus.counts("orders") == {"active": 0, "scheduled": 0, "locked": 0, "dead_letter": 1}
    peeked = bus.peek("orders/$deadletterqueue")
    assert [m.message_id for m in peeked] == ["poison"]
    dead = receive_one(bus, dead_letter_queue("orders"))
    assert dead.queue == "orders/$deadletterqueue"
    assert dead.body == b"poison"
    assert dead.correlation_id == "c-1"
    assert dead.dead_letter_reason == MAX_DELIVERY_COUNT_EXCEEDED
    assert dead.dead_letter_error_description
    bus.complete(dead)
    assert bus.counts("orders")["dead_letter"] == 0


def test_a_lock_that_expires_after_the_last_delivery_dead_letters_on_the_next_receive(
    bus: LocalServiceBus, clock: FakeClock
) -> None:
    bus.send("orders", b"poison", message_id="poison")
    bus.send("orders", b"fine", message_id="fine")
    for delivery in range(1, 4):
        message = receive_one(bus)
        assert (message.message_id, message.delivery_count) == ("poison", delivery)
        clock.advance(LOCK)  # the consumer crashed: the lock just runs out

    # The poison message is skipped on the way, so the next one is still handed out.
    assert [m.message_id for m in bus.receive("orders", max_messages=5)] == ["fine"]
    dead = bus.peek("ORDERS/$DeadLetterQueue")
    assert [(m.message_id, m.delivery_count) for m in dead] == [("poison", 3)]
    assert dead[0].dead_letter_reason == MAX_DELIVERY_COUNT_EXCEEDED


def test_the_dead_letter_queue_has_no_max_delivery_rule(bus: LocalServiceBus) -> None:
    bus.send("orders", b"x")
    bus.dead_letter(receive_one(bus), "Poison")

    for delivery in range(2, 8):
        dead = receive_one(bus, "orders/$deadletterqueue")
        assert dead.delivery_count == delivery
        bus.abandon(dead)
    assert bus.counts("orders")["dead_letter"] == 1


def test_explicit_dead_letter_keeps_reason_and_description(bus: LocalServiceBus) -> None:
    bus.send("orders", b"x", message_id="m-1", application_properties={"attempt": 1})
    message = receive_one(bus)

    bus.dead_letter(message, "ValidationFailed", "Total does not match the lines")

    assert bus.receive("orders") == []
    dead = receive_one(bus, "orders/$deadletterqueue")
    assert dead.message_id == "m-1"
    assert dead.sequence_number == message.sequence_number
    assert dead.dead_letter_reason == "ValidationFailed"
    assert dead.dead_letter_error_description == "Total does not match the lines"
    assert dead.application_properties == {"attempt": 1}
    with pytest.raises(ValueError, match="already in the dead-letter queue"):
        bus.dead_letter(dead, "Again")


def test_a_duplicate_message_id_inside_the_window_is_dropped(bus: LocalServiceBus, clock: FakeClock) -> None:
    assert bus.send("orders", b"first", message_id="m-1")
    clock.advance(timedelta(minutes=9))
    assert not bus.send("orders", b"second", message_id="m-1")
    assert bus.send("orders", b"other id", message_id="m-2")
    # The window runs from the first send; the dropped duplicate did not extend it.
    clock.advance(timedelta(minutes=1))
    assert bus.send("orders", b"third", message_id="m-1")

    bodies = [m.body for m in bus.peek("orders")]
    assert bodies == [b"first", b"other id", b"third"]


def test_duplicate_detection_is_per_queue_and_can_be_off(bus: LocalServiceBus) -> None:
    bus.declare(QueueConfig("other"))
    assert bus.send("orders", b"x", message_id="m-1")
    assert bus.send("other", b"x", message_id="m-1")
    assert bus.send("nodedup", b"x", message_id="m-1")
    assert bus.send("nodedup", b"x", message_id="m-1")
    assert bus.counts("nodedup")["active"] == 2


def test_a_scheduled_message_is_hidden_until_its_time(bus: LocalServiceBus, clock: FakeClock) -> None:
    at = T0 + timedelta(minutes=5)
    bus.send("orders", b"later", message_id="later", scheduled_enqueue_time=at)
    bus.send("orders", b"now", message_id="now")

    assert bus.counts("orders") == {"active": 1, "scheduled": 1, "locked": 0, "dead_letter": 0}
    received = bus.receive("orders", max_messages=10)
    assert [m.message_id for m in received] == ["now"]
    assert bus.next_due() == T0 + LOCK  # the lock runs out before the schedule comes due
    bus.complete(received[0])
    assert bus.next_due() == at

    clock.advance(timedelta(minutes=5) - timedelta(microseconds=1))
    assert bus.receive("orders") == []
    assert bus.next_due() == at
    clock.now = bus.next_due() or clock.now  # what a host on a virtual clock does when idle

    message = receive_one(bus)
    assert message.message_id == "later"
    assert message.scheduled_enqueue_time == at
    assert message.enqueued_time == at


def test_next_due_reports_lock_expiry_and_none_when_nothing_waits(
    bus: LocalServiceBus, clock: FakeClock
) -> None:
    assert bus.next_due() is None
    bus.send("orders", b"x")
    assert bus.next_due() is None  # receivable now is not in the future
    message = receive_one(bus)
    assert bus.next_due() == T0 + LOCK
    bus.complete(message)
    assert bus.next_due() is None


def test_counts(bus: LocalServiceBus) -> None:
    for index in range(4):
        bus.send("orders", b"x", message_id=f"m-{index}")
    bus.send("orders", b"x", scheduled_enqueue_time=T0 + timedelta(hours=1))
    locked = bus.receive("orders", max_messages=2)
    bus.dead_letter(locked[0], "Poison")

    assert bus.counts("orders") == {"active": 2, "scheduled": 1, "locked": 1, "dead_letter": 1}
    assert bus.counts("Orders/$DeadLetterQueue") == bus.counts("orders")


def test_peek_changes_nothing_and_shows_locked_messages(bus: LocalServiceBus) -> None:
    bus.send("orders", b"a", message_id="a")
    bus.send("orders", b"b", message_id="b")
    locked = receive_one(bus)

    peeked = bus.peek("orders")

    assert [(m.message_id, m.delivery_count) for m in peeked] == [("a", 1), ("b", 0)]
    assert peeked[0].locked_until == locked.locked_until
    assert peeked[1].locked_until == NOT_LOCKED
    assert all(m.lock_token == "" for m in peeked)
    assert bus.peek("orders", max_messages=1) == peeked[:1]
    with pytest.raises(MessageLockLost):
        bus.complete(peeked[1])
    assert receive_one(bus).message_id == "b"


def test_application_properties_and_correlation_id_round_trip(bus: LocalServiceBus) -> None:
    properties = {"orderId": "o-1", "attempt": 3, "ratio": 0.5, "flag": True, "none": None}
    bus.send(
        "orders",
        '{"OrderID": "o-1"}',
        correlation_id="corr-1",
        reply_to="status-app-a",
        application_properties=properties,
    )

    message = receive_one(bus)

    assert message.application_properties == properties
    assert message.correlation_id == "corr-1"
    assert message.reply_to == "status-app-a"
    assert message.body == b'{"OrderID": "o-1"}'
    assert len(message.message_id) == 32  # a uuid4 hex by default
    # AMQP 1.0 (3.2.5): application-properties values are simple types, no maps or lists.
    with pytest.raises(ValueError, match="'tags': a list is not a type Service Bus carries"):
        bus.send("orders", "{}", application_properties={"tags": ["a"]})


def test_an_undeclared_queue_raises_queue_not_found(bus: LocalServiceBus) -> None:
    with pytest.raises(QueueNotFound, match="missing"):
        bus.send("missing", b"x")
    with pytest.raises(QueueNotFound, match="missing"):
        bus.receive("missing/$deadletterqueue")
    with pytest.raises(QueueNotFound, match="missing"):
        bus.peek("missing")
    with pytest.raises(QueueNotFound, match="missing"):
        bus.counts("missing")


def test_entity_paths_are_case_insensitive(bus: LocalServiceBus) -> None:
    bus.declare(QueueConfig("Status-App-A"))
    assert bus.send("STATUS-APP-A", b"x")
    message = receive_one(bus, "status-app-a")
    assert message.queue == "status-app-a"
    bus.dead_letter(message, "Poison")
    assert receive_one(bus, "Status-App-A/$DeadLetterQueue").queue == "status-app-a/$deadletterqueue"


def test_declare_is_idempotent_and_updates_the_config(tmp_path: Path, bus: LocalServiceBus) -> None:
    bus.declare(QueueConfig("orders", max_delivery_count=3, lock_duration=LOCK))
    bus.declare(QueueConfig("orders", max_delivery_count=5, lock_duration=LOCK))

    names = [q.name for q in bus.queues()]
    assert names == ["nodedup", "orders"]
    with LocalServiceBus(tmp_path / "bus.db") as other:
        assert QueueConfig("orders", max_delivery_count=5, lock_duration=LOCK) in other.queues()
        assert QueueConfig("nodedup", duplicate_detection_window=None) in other.queues()


def test_sending_to_a_dead_letter_queue_is_refused(bus: LocalServiceBus) -> None:
    with pytest.raises(ValueError, match="dead-letter"):
        bus.send("orders/$deadletterqueue", b"x")


def test_naive_datetimes_are_refused(bus: LocalServiceBus) -> None:
    with pytest.raises(ValueError, match="naive"):
        bus.send("orders", b"x", scheduled_enqueue_time=datetime(2026, 1, 1))


def test_threads_sharing_one_bus_receive_each_message_once(bus: LocalServiceBus) -> None:
    for index in range(100):
        bus.send("orders", b"x", message_id=f"m-{index}")
    seen: list[str] = []
    seen_lock = threading.Lock()

    def consume() -> None:
        while messages := bus.receive("orders", max_messages=3):
            for message in messages:
                bus.complete(message)
                with seen_lock:
                    seen.append(message.message_id)

    threads = [threading.Thread(target=consume) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(seen) == sorted(f"m-{index}" for index in range(100))


def _drain(
    path: str, start: "multiprocessing.synchronize.Barrier", results: "multiprocessing.Queue[list[str]]"
) -> None:
    """A worker process: receive and complete until the queue is empty, then report what it got."""
    received: list[str] = []
    with LocalServiceBus(path) as bus:
        # Without the barrier the first process to start up often drains the queue alone.
        start.wait()
        while messages := bus.receive("work"):
            for message in messages:
                bus.complete(message)
                received.append(message.message_id)
    results.put(received)


@pytest.mark.processes  # multiprocessing
@pytest.mark.slow
def test_processes_draining_one_queue_receive_every_message_exactly_once(tmp_path: Path) -> None:
    path = tmp_path / "bus.db"
    total, workers = 200, 4
    with LocalServiceBus(path, [QueueConfig("work")]) as bus:
        for index in range(total):
            assert bus.send("work", b"x", message_id=f"m-{index:03d}")
        context = multiprocessing.get_context("spawn")
        start = context.Barrier(workers)
        results: multiprocessing.Queue[list[str]] = context.Queue()
        procs = [context.Process(target=_drain, args=(str(path), start, results)) for _ in range(workers)]
        for proc in procs:
            proc.start()
        # Read before joining: a child does not exit while its queued result is unread.
        per_worker = [results.get(timeout=60) for _ in range(workers)]
        for proc in procs:
            proc.join(timeout=60)
            assert proc.exitcode == 0

        received = [message_id for ids in per_worker for message_id in ids]
        assert len(received) == total
        assert sorted(received) == [f"m-{index:03d}" for index in range(total)]
        assert bus.counts("work") == {"active": 0, "scheduled": 0, "locked": 0, "dead_letter": 0}


def test_dead_letter_by_lock_token_settles_the_message_a_trigger_holds(bus: LocalServiceBus) -> None:
    bus.send("orders", "x", message_id="m")
    message = receive_one(bus)
    bus.dead_letter_by_lock_token("orders", message.lock_token, "Rejected", "bad order")
    [dead] = bus.peek("orders/$deadletterqueue")
    assert (dead.message_id, dead.dead_letter_reason, dead.dead_letter_error_description) == (
        "m",
        "Rejected",
        "bad order",
    )
    with pytest.raises(MessageLockLost):
        bus.complete(message)  # already settled by the function
    with pytest.raises(MessageLockLost):
        bus.dead_letter_by_lock_token("orders", "not-a-token", "Rejected")


def test_wait_for_commit_sees_another_connections_send_and_times_out_without_one(tmp_path: Path) -> None:
    """What an idle receiver blocks on instead of polling: another process's commit."""
    path = tmp_path / "wait.db"
    with LocalServiceBus(path) as mine, LocalServiceBus(path) as other:
        mine.declare(QueueConfig("orders"))
        marker = mine.commit_marker()
        assert not mine.wait_for_commit(marker, timeout=0.05)
        assert mine.receive("orders") == []  # its own empty look commits nothing
        assert mine.commit_marker() == marker
        other.send("orders", b"x", message_id="m-1")  # after the marker, before the wait
        assert mine.wait_for_commit(marker, timeout=30)  # returns at once: no commit is missed
        assert [m.message_id for m in mine.receive("orders")] == ["m-1"]


# --- message time-to-live (the rows both stand-ins share are in tests/conformance/) -------------

TTL = timedelta(minutes=5)


@pytest.fixture
def expiring(tmp_path: Path, clock: FakeClock) -> Iterator[LocalServiceBus]:
    queues = [
        QueueConfig("expiring", default_message_ttl=TTL, dead_letter_on_expiration=True),
        QueueConfig("dropping", default_message_ttl=TTL),
    ]
    with LocalServiceBus(tmp_path / "bus.db", queues, clock=clock) as bus:
        yield bus


def test_expiry_runs_on_the_injected_clock_and_next_due_stops_there(
    expiring: LocalServiceBus, clock: FakeClock
) -> None:
    expiring.send("expiring", b"x", message_id="m-1")
    assert expiring.next_due() == T0 + TTL  # what a host on a virtual clock jumps to
    clock.now = T0 + TTL - timedelta(microseconds=1)
    [alive] = expiring.peek("expiring")
    assert alive.message_id == "m-1"
    clock.now = T0 + TTL
    assert expiring.receive("expiring") == []
    assert expiring.next_due() is None  # the dead-letter queue keeps it: no expiry there
    [dead] = expiring.peek(dead_letter_queue("expiring"))
    assert (dead.dead_letter_reason, dead.dead_letter_error_description) == (
        "TTLExpiredException",
        "The message expired and was dead lettered.",
    )


def test_the_dead_letter_queues_receive_finds_what_expired_though_nobody_received_the_queue(
    expiring: LocalServiceBus, clock: FakeClock
) -> None:
    expiring.send("expiring", b"x", message_id="m-1")
    clock.advance(TTL)
    [dead] = expiring.receive(dead_letter_queue("expiring"))
    assert (dead.message_id, dead.dead_letter_reason) == ("m-1", "TTLExpiredException")


def test_a_messages_own_ttl_counts_in_whole_seconds_as_the_sdk_sends_it(
    expiring: LocalServiceBus, clock: FakeClock
) -> None:
    expiring.send("dropping", b"x", message_id="short", time_to_live=timedelta(seconds=2.9))
    expiring.send("dropping", b"x", message_id="sub-second", time_to_live=timedelta(seconds=0.5))
    assert expiring.next_due() == T0 + timedelta(seconds=2)
    clock.advance(timedelta(seconds=2))
    assert [m.message_id for m in expiring.receive("dropping", 5)] == ["sub-second"]  # none: the queue's
    assert expiring.counts("dropping")["dead_letter"] == 0
    with pytest.raises(ValueError, match="negative"):
        expiring.send("dropping", b"x", message_id="bad", time_to_live=timedelta(seconds=-1))


def test_a_message_at_its_delivery_limit_is_dead_lettered_for_that_first(
    tmp_path: Path, clock: FakeClock
) -> None:
    config = QueueConfig("q", max_delivery_count=1, lock_duration=LOCK, default_message_ttl=TTL)
    with LocalServiceBus(tmp_path / "bus.db", [config], clock=clock) as bus:
        bus.send("q", b"x", message_id="m-1")
        receive_one(bus, "q")
        clock.advance(TTL + LOCK)  # the lock ran out after the message expired
        assert bus.receive("q") == []
        [dead] = bus.peek(dead_letter_queue("q"))
        assert dead.dead_letter_reason == MAX_DELIVERY_COUNT_EXCEEDED


def test_a_file_from_before_expiry_is_migrated_and_keeps_its_messages(
    tmp_path: Path, clock: FakeClock
) -> None:
    path = tmp_path / "bus.db"
    with sqlite3.connect(path) as old:  # the schema as main wrote it before time-to-live
        old.executescript(
            SCHEMA.replace("    default_ttl_us      INTEGER,\n", "")
            .replace("    dead_letter_on_expiration INTEGER NOT NULL DEFAULT 0\n", "")
            .replace("duplicate_window_us INTEGER,", "duplicate_window_us INTEGER")
            .replace(
                "dead_letter_error_description TEXT,\n    expires_at                    TEXT",
                "dead_letter_error_description TEXT",
            )
        )
        old.execute("INSERT INTO queues VALUES ('old', 10, 30000000, NULL)")
        old.execute(
            "INSERT INTO messages (queue, visible_at, message_id, body, application_properties,"
            " enqueued_time) VALUES ('old', ?, 'kept', x'00', '{}', ?)",
            (format_ts(T0), format_ts(T0)),
        )
        assert "expires_at" not in {row[1] for row in old.execute("PRAGMA table_info(messages)")}
    old.close()
    with LocalServiceBus(path, [QueueConfig("old", default_message_ttl=TTL)], clock=clock) as bus:
        assert {c.name: c.default_message_ttl for c in bus.queues()} == {"old": TTL}
        clock.advance(TTL * 2)  # a message from before has no expiry
        assert [m.message_id for m in bus.receive("old")] == ["kept"]
    with sqlite3.connect(path) as reopened:
        columns = {row[1] for row in reopened.execute("PRAGMA table_info(messages)")}
    reopened.close()
    assert "expires_at" in columns


def test_devhost_reads_ttl_and_dead_lettering_from_config_json(tmp_path: Path) -> None:
    props = {"DefaultMessageTimeToLive": "PT1H", "DeadLetteringOnMessageExpiration": True}
    [queue] = queues_from_emulator_config(write_config(tmp_path / "Config.json", {"Orders": props}))
    assert (queue.name, queue.default_message_ttl, queue.dead_letter_on_expiration) == (
        "orders",
        timedelta(hours=1),
        True,
    )
    [plain] = queues_from_emulator_config(write_config(tmp_path / "plain.json", {"q": {}}))
    assert (plain.default_message_ttl, plain.dead_letter_on_expiration) == (None, False)


def test_devhost_refuses_a_config_json_lock_duration_over_five_minutes_naming_the_file(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path / "Config.json", {"q": {"LockDuration": "PT1H"}})
    with pytest.raises(SettingsError, match=r"Config.json: queue 'q': LockDuration 1:00:00 is above"):
        queues_from_emulator_config(path)
