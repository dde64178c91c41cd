"""devhost runs a real function app: every trigger, the Durable SDK's replay, the SDK client."""

import asyncio
import json
import logging
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.servicebus.local_bus import LocalServiceBus
from harness.devhost import bindings
from harness.devhost.clock import VirtualClock
from harness.devhost.durable_wire import (
    EventType,
    context_fields,
    orchestration_context,
    split_orchestrator_error,
)
from harness.devhost.host import Host
from harness.devhost.indexing import IndexingError
from harness.devhost.settings import SettingsError
from tests.support.devhost_sample import SAMPLE_APP, Sample, make_sample


def test_indexing_reads_every_function_with_its_trigger(sample: Sample) -> None:
    triggers = {spec.name: spec.trigger_type for spec in sample.host.functions}
    assert triggers["hello"] == "httpTrigger"
    assert triggers["work"] == "serviceBusTrigger"
    assert triggers["tick"] == "timerTrigger"
    assert triggers["chain"] == "orchestrationTrigger"
    assert triggers["greet"] == "activityTrigger"
    work = next(s for s in sample.host.functions if s.name == "work")
    assert work.trigger["queueName"] == "work"  # %WORK_QUEUE% resolved from local.settings.json


def _write_app(directory: Path, body: str) -> Path:
    directory.mkdir()
    (directory / "function_app.py").write_text(
        "import azure.functions as func\napp = func.FunctionApp()\n" + body
    )
    return directory


def _start(loop: asyncio.AbstractEventLoop, app_dir: Path, tmp_path: Path) -> None:
    host = Host(app_dir, data_dir=tmp_path / f"data-{app_dir.name}", port=0, env={}, clock=VirtualClock())
    try:
        loop.run_until_complete(host.start())
    finally:
        loop.run_until_complete(host.stop())


def test_an_unsupported_trigger_is_a_start_up_error_naming_the_function(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    app_dir = _write_app(
        tmp_path / "blob_app",
        "@app.blob_trigger(arg_name='blob', path='c/{name}', connection='S')\n"
        "def on_blob(blob: func.InputStream) -> None:\n    pass\n",
    )
    with pytest.raises(IndexingError, match=r"on_blob.*blobTrigger"):
        _start(loop, app_dir, tmp_path)


def test_an_app_the_worker_refuses_stops_the_start_with_the_workers_message(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    app_dir = _write_app(
        tmp_path / "annotated_app",
        "from typing import Any\n"
        "@app.route(route='x')\n"
        "def takes_a_dict(req: func.HttpRequest, extra: dict[str, Any]) -> func.HttpResponse:\n"
        "    return func.HttpResponse('x')\n",
    )
    with pytest.raises(IndexingError, match=r"takes_a_dict function: the following parameters are declared"):
        _start(loop, app_dir, tmp_path)


def test_an_unsupported_binding_and_a_missing_setting_are_errors(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    app_dir = _write_app(
        tmp_path / "out_app",
        "@app.route(route='x')\n"
        "@app.queue_output(arg_name='out', queue_name='q', connection='S')\n"
        "def with_output(req: func.HttpRequest, out: func.Out[str]) -> func.HttpResponse:\n"
        "    return func.HttpResponse('x')\n",
    )
    with pytest.raises(IndexingError, match=r"with_output.*queue"):
        _start(loop, app_dir, tmp_path)
    app_dir = _write_app(
        tmp_path / "setting_app",
        "@app.service_bus_queue_trigger(arg_name='m', queue_name='%MISSING%', connection='S')\n"
        "def on_message(m: func.ServiceBusMessage) -> None:\n    pass\n",
    )
    with pytest.raises(SettingsError, match=r"on_message.*MISSING"):
        _start(loop, app_dir, tmp_path)


def test_a_service_bus_body_devhost_cannot_bind_is_a_start_up_error(
    loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    app_dir = _write_app(
        tmp_path / "stream_app",
        "@app.service_bus_queue_trigger(arg_name='m', queue_name='q', connection='S', data_type='STREAM')\n"
        "def as_stream(m: func.ServiceBusMessage) -> None:\n    pass\n",
    )
    with pytest.raises(IndexingError, match=r"as_stream: .*binary or string, not dataType 'STREAM'"):
        _start(loop, app_dir, tmp_path)


def test_http_trigger_with_route_parameters_and_query(sample: Sample) -> None:
    status, text = sample.http("GET", "/api/hello/bob?q=42")
    assert status == 200
    assert json.loads(text) == {"hello": "bob", "q": "42"}


def test_servicebus_trigger_gets_the_message_and_its_properties(sample: Sample) -> None:
    sample.host.servicebus.send(
        "work",
        json.dumps({"id": "m1"}),
        message_id="mid-1",
        correlation_id="corr-1",
        application_properties={"app": "a"},
    )
    sample.run(sample.host.run_until(lambda: bool(sample.records("work"))))
    [record] = sample.records("work")
    assert record["id"] == "m1" and record["message_id"] == "mid-1"
    assert record["correlation_id"] == "corr-1" and record["properties"] == {"app": "a"}
    assert record["delivery_count"] == 1
    assert sample.host.servicebus.counts("work")["active"] == 0  # completed


def test_a_message_that_always_fails_is_dead_lettered_after_max_delivery_count(sample: Sample) -> None:
    sample.host.servicebus.send("work", json.dumps({"action": "fail"}), message_id="poison")
    sample.run(sample.host.run_until(lambda: sample.host.servicebus.counts("work")["dead_letter"] == 1))
    [dead] = sample.host.servicebus.peek("work/$deadletterqueue")
    assert dead.message_id == "poison"
    assert dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert (
        dead.delivery_count == 3
    )  # the queue's MaxDeliveryCount in harness/emulators/servicebus-config/Config.json


def test_a_body_that_is_not_text_fails_each_delivery_and_is_dead_lettered(sample: Sample) -> None:
    sample.host.servicebus.send("work", b"\xff\xfe binary", message_id="not-text")
    sample.run(sample.host.run_until(lambda: sample.host.servicebus.counts("work")["dead_letter"] == 1))
    [dead] = sample.host.servicebus.peek("work/$deadletterqueue")
    assert dead.message_id == "not-text" and dead.dead_letter_reason == "MaxDeliveryCountExceeded"
    assert not sample.records("work")  # the function never ran: the binding failed first


SETTLING_APP = """
import json
import os
from datetime import timedelta

from adapters.clock import host_clock
from adapters.servicebus.local_bus import LocalServiceBus


@app.service_bus_queue_trigger(arg_name="msg", queue_name="work", connection="ServiceBusConnection")
def settle(msg: func.ServiceBusMessage) -> None:
    action = json.loads(msg.get_body())["action"]
    clock = host_clock()
    if action.startswith("dead-letter"):  # what the app's settlement port does with a message it rejects
        with LocalServiceBus(os.environ["LOCAL_SERVICEBUS_PATH"], clock=clock.now) as bus:
            bus.dead_letter_by_lock_token("work", msg.lock_token, "Rejected", "the function said no")
    elif action == "outlive-lock" and msg.delivery_count == 1:
        clock.advance(timedelta(minutes=1))  # past the queue's 30 s lock, as a hung call would
    if action.endswith("then-fail"):
        raise RuntimeError("failing after settling")
"""


@pytest.fixture
def settling_host(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Host]:
    app_dir = _write_app(tmp_path / "settling_app", SETTLING_APP)
    monkeypatch.setenv("ServiceBusConnection", "local")
    monkeypatch.setenv(
        "DEVHOST_SERVICEBUS_CONFIG", str(SAMPLE_APP / "emulators" / "servicebus-config" / "Config.json")
    )
    # The host exports it to the process environment, where the function reads it.
    monkeypatch.setenv("LOCAL_SERVICEBUS_PATH", str(tmp_path / "data" / "servicebus.db"))
    # In process: the function reaches the host's own clock and bus module, which a worker
    # process running the written app alone could not import.
    host = Host(
        app_dir, data_dir=tmp_path / "data", port=0, env=os.environ, clock=VirtualClock(), in_process=True
    )
    loop.run_until_complete(host.start())
    yield host
    loop.run_until_complete(host.stop())


def _devhost_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("devhost")]


@pytest.mark.parametrize("action", ["dead-letter", "dead-letter-then-fail"])
def test_a_message_the_function_dead_lettered_itself_is_left_alone_quietly(
    settling_host: Host, loop: asyncio.AbstractEventLoop, caplog: pytest.LogCaptureFixture, action: str
) -> None:
    bus = settling_host.servicebus
    assert isinstance(bus, LocalServiceBus)
    bus.send("work", json.dumps({"action": action}), message_id="rejected")
    with caplog.at_level(logging.DEBUG, logger="devhost"):
        loop.run_until_complete(settling_host.run_until(lambda: bus.counts("work")["dead_letter"] == 1))
        loop.run_until_complete(settling_host.pump())
    [dead] = bus.peek("work/$deadletterqueue")
    assert (dead.message_id, dead.dead_letter_reason, dead.delivery_count) == ("rejected", "Rejected", 1)
    assert bus.counts("work") == {"active": 0, "scheduled": 0, "locked": 0, "dead_letter": 1}
    settled = [r for r in _devhost_records(caplog) if "settled already" in r.getMessage()]
    assert [r.levelno for r in settled] == [logging.DEBUG]
    # No "lock lost ... redelivered": the host's complete (or abandon) found the message settled.
    assert not [r for r in _devhost_records(caplog) if "lock lost" in r.getMessage()]
    # Above DEBUG only what the function did: its failure, when it raised after settling.
    loud = [r.getMessage() for r in _devhost_records(caplog) if r.levelno > logging.DEBUG]
    expected = [
        "function settle failed on message rejected (delivery 1): RuntimeError: failing after settling"
    ]
    assert loud == (expected if action.endswith("then-fail") else [])


def test_a_lock_that_expired_while_the_function_ran_is_still_a_warning(
    settling_host: Host, loop: asyncio.AbstractEventLoop, caplog: pytest.LogCaptureFixture
) -> None:
    bus = settling_host.servicebus
    assert isinstance(bus, LocalServiceBus)
    bus.send("work", json.dumps({"action": "outlive-lock"}), message_id="slow")
    with caplog.at_level(logging.DEBUG, logger="devhost"):
        loop.run_until_complete(settling_host.pump())  # delivery 1 outlives its lock: not completed
        assert bus.counts("work")["active"] == 1  # back in the queue
        loop.run_until_complete(settling_host.pump())  # delivery 2 completes
    assert bus.counts("work") == {"active": 0, "scheduled": 0, "locked": 0, "dead_letter": 0}
    lost = [r for r in _devhost_records(caplog) if "lock lost" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in lost] == [
        (logging.WARNING, "lock lost on message slow of settle: it will be redelivered")
    ]
    assert not [r for r in _devhost_records(caplog) if "settled already" in r.getMessage()]


def test_a_duplicate_message_id_inside_the_window_is_dropped(sample: Sample) -> None:
    assert sample.host.servicebus.send("work", json.dumps({"id": "first"}), message_id="same")
    assert not sample.host.servicebus.send("work", json.dumps({"id": "second"}), message_id="same")
    sample.run(sample.host.run_until(lambda: bool(sample.records("work"))))
    sample.run(sample.host.pump())
    assert [r["id"] for r in sample.records("work")] == ["first"]


def _raw_request(sample: Sample, request: bytes) -> tuple[int, bytes]:
    """Send one request exactly as given, on a connection of its own: the status and the reply."""

    async def call() -> tuple[int, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", sample.host.bound_port)
        try:
            writer.write(request)
            await writer.drain()
            reply = await reader.read()  # the host closes the connection after a refusal
        finally:
            writer.close()
        status_line = reply.split(b"\r\n", 1)[0]
        return int(status_line.split()[1]), reply

    return sample.run(call())


def _server_errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info or r.exc_text]


def test_an_over_long_request_line_is_414_without_a_traceback(
    sample: Sample, caplog: pytest.LogCaptureFixture
) -> None:
    path = "/api/hello/" + "x" * 10 * 1024  # Kestrel's MaxRequestLineSize is 8 KB
    with caplog.at_level(logging.DEBUG):
        status, reply = _raw_request(sample, f"GET {path} HTTP/1.1\r\nHost: devhost\r\n\r\n".encode())
    assert status == 414, reply
    assert not _server_errors(caplog)
    [refused] = [r for r in caplog.records if "refused a request" in r.getMessage()]
    assert refused.levelno == logging.INFO and "414 URI Too Long" in refused.getMessage()


@pytest.mark.parametrize(("size", "expected"), [(8 * 1024, 200), (8 * 1024 + 1, 414)])
def test_the_request_line_limit_counts_as_kestrel_does(
    sample: Sample, caplog: pytest.LogCaptureFixture, size: int, expected: int
) -> None:
    """The whole line with its CRLF, at most 8192 bytes (aiohttp's C parser counts the URL only)."""
    line = "GET /api/hello/{} HTTP/1.1\r\n"
    line = line.format("x" * (size - len(line) + 2))
    assert len(line) == size
    with caplog.at_level(logging.DEBUG):
        status, reply = _raw_request(sample, f"{line}Host: devhost\r\nConnection: close\r\n\r\n".encode())
    assert status == expected, reply
    assert not _server_errors(caplog)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        # Every header line with its CRLF, together at most 32 KB (MaxRequestHeadersTotalSize):
        # 44 bytes are Host's line, Connection's line and X-Fill's own name, ": " and CRLF.
        ([("X-Fill", "x" * (32 * 1024 - 44))], 200),
        ([("X-Fill", "x" * (32 * 1024 - 43))], 431),
        ([(f"X-Part-{i}", "x" * 8 * 1024) for i in range(5)], 431),  # each line short, 40 KB together
        ([("X-Big", "x" * 40 * 1024)], 431),  # one line longer than all may be: the parser refuses
        # At most 100 headers (MaxRequestHeaderCount), Host and Connection among them.
        ([(f"X-Count-{i}", "x") for i in range(98)], 200),
        ([(f"X-Count-{i}", "x") for i in range(99)], 431),
        ([(f"X-Count-{i}", "x") for i in range(200)], 431),  # so many that the parser refuses them
    ],
)
def test_headers_over_kestrels_limits_are_431_without_a_traceback_and_within_them_pass(
    sample: Sample, caplog: pytest.LogCaptureFixture, headers: list[tuple[str, str]], expected: int
) -> None:
    block = "".join(f"{name}: {value}\r\n" for name, value in headers)
    with caplog.at_level(logging.DEBUG):
        status, reply = _raw_request(
            sample,
            f"GET /api/hello/bob HTTP/1.1\r\nHost: devhost\r\nConnection: close\r\n{block}\r\n".encode(),
        )
    assert status == expected, reply
    assert not _server_errors(caplog)


def test_timer_trigger_fires_each_occurrence_once_under_the_virtual_clock(sample: Sample) -> None:
    start = sample.host.clock.now()
    sample.run(sample.host.run_until(lambda: len(sample.records("tick")) == 3))
    assert sample.host.clock.now() - start == timedelta(minutes=30)  # "0 */10 * * * *"
    assert [r["past_due"] for r in sample.records("tick")] == [False, False, False]


def test_a_missed_occurrence_fires_once_past_due_after_a_restart(
    sample: Sample, loop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample.run(sample.host.run_until(lambda: len(sample.records("tick")) == 1))
    clock = sample.host.clock
    assert isinstance(clock, VirtualClock)
    sample.run(sample.host.stop())
    clock.advance(timedelta(hours=1))  # the host is down for six occurrences
    restarted = make_sample(loop, tmp_path, monkeypatch, clock)
    try:
        assert [r["past_due"] for r in restarted.records("tick")] == [False, True]
    finally:
        restarted.run(restarted.host.stop())
    sample.host = restarted.host  # the fixture stops whatever host it holds; this one is stopped


def test_orchestration_runs_an_activity_chain(sample: Sample) -> None:
    instance = sample.start("chain", ["x", "y", "z"])
    sample.run_until_finished(instance)
    status = sample.status(instance)
    assert status["runtimeStatus"] == "Completed"
    assert status["output"] == ["hello x", "hello y", "hello z"]
    history = sample.host.engine.history(instance)
    scheduled = [e["Name"] for e in history if e["EventType"] == EventType.TASK_SCHEDULED]
    assert scheduled == ["greet", "greet", "greet"]


def test_status_through_the_sdk_client(sample: Sample) -> None:
    instance = sample.start("chain")
    sample.run_until_finished(instance)
    status, text = sample.http("GET", f"/api/status/{instance}")
    assert status == 200
    assert json.loads(text)["status"] == "Completed"
    status, text = sample.http("GET", "/api/status/nobody")
    assert json.loads(text)["status"] is None


# The SDK's raise_event JSON-encodes its data twice, and the extension stores the parsed body as
# it is (HttpApiHandler.HandleRaiseEventRequestAsync), so a string raised by the SDK reaches the
# orchestrator with its quotes: https://github.com/Azure/azure-functions-durable-python/issues/295
SDK_RAISED = '"{}"'.format


def test_the_event_wins_the_race_and_the_losing_timer_is_cancelled(sample: Sample) -> None:
    instance = sample.start("race", {"timeout": 1800})
    started = sample.host.clock.now()
    sample.run(sample.host.pump())
    status, _ = sample.http("POST", f"/api/raise/{instance}/Approval", "yes")
    assert status == 202
    sample.run_until_finished(instance)
    assert sample.status(instance)["output"] == f"approved:{SDK_RAISED('yes')}"
    assert sample.host.clock.now() == started  # finished without waiting for the timer
    assert sample.host.engine.next_due() is None  # the timer is gone, not merely ignored


def test_the_timer_wins_the_race_in_virtual_time(sample: Sample) -> None:
    instance = sample.start("race", {"timeout": 1800})
    started = sample.host.clock.now()
    sample.run_until_finished(instance)
    assert sample.status(instance)["output"] == "timed out"
    assert sample.host.clock.now() - started == timedelta(minutes=30)


def test_an_uncancelled_timer_keeps_the_instance_running_until_it_fires(sample: Sample) -> None:
    instance = sample.start("race", {"timeout": 600, "cancel": False})
    started = sample.host.clock.now()
    sample.run(sample.host.pump())
    sample.http("POST", f"/api/raise/{instance}/Approval", "yes")
    sample.run(sample.host.pump())
    assert sample.status(instance)["runtimeStatus"] == "Running"
    sample.run_until_finished(instance)
    assert sample.status(instance)["output"] == f"approved:{SDK_RAISED('yes')}"
    assert sample.host.clock.now() - started == timedelta(minutes=10)


def test_an_event_raised_before_the_wait_is_buffered(sample: Sample) -> None:
    instance = sample.start("race", {"timeout": 1800})
    # Raised before the orchestrator has run at all.
    status, _ = sample.http("POST", f"/api/raise/{instance}/Approval", "early")
    assert status == 202
    sample.run_until_finished(instance)
    assert sample.status(instance)["output"] == f"approved:{SDK_RAISED('early')}"


def test_an_activity_exception_can_be_caught_by_the_orchestrator(sample: Sample) -> None:
    instance = sample.start("catch")
    sample.run_until_finished(instance)
    output = sample.status(instance)["output"]
    assert output.startswith("caught: Activity function 'boom' failed: KeyError")
    assert "no such thing: x" in output


def test_an_orchestrator_that_raises_ends_failed_with_the_error(sample: Sample) -> None:
    instance = sample.start("crash")
    sample.run_until_finished(instance)
    status = sample.status(instance)
    assert status["runtimeStatus"] == "Failed"
    assert "kaput" in status["output"]


def test_raise_event_on_a_completed_or_unknown_instance_raises_through_the_sdk(sample: Sample) -> None:
    instance = sample.start("chain")
    sample.run_until_finished(instance)
    status, text = sample.http("POST", f"/api/raise/{instance}/Approval", "late")
    assert status == 409 and "is gone" in text  # 410 from the API, raised by the SDK
    status, text = sample.http("POST", "/api/raise/nobody/Approval", "late")
    assert status == 409 and "No instance with ID nobody" in text  # 404


def test_custom_status_and_continue_as_new(sample: Sample) -> None:
    instance = sample.start("counter", 0, instance_id="counter-1")
    assert instance == "counter-1"
    for expected in (0, 1, 2):
        sample.run(sample.host.run_until(lambda: sample.status(instance)["customStatus"] is not None))
        assert sample.status(instance)["customStatus"] == {"count": expected}
        sample.http("POST", f"/api/raise/{instance}/Go", None)
        if expected < 2:
            sample.run(
                sample.host.run_until(
                    lambda e=expected: (sample.status(instance)["customStatus"] or {}).get("count") == e + 1
                )
            )
    sample.run_until_finished(instance)
    assert sample.status(instance)["output"] == 3


def test_a_non_deterministic_orchestrator_fails_clearly(sample: Sample) -> None:
    instance = sample.start("fickle")
    sample.run_until_finished(instance)
    status = sample.status(instance)
    assert status["runtimeStatus"] == "Failed"
    assert "Non-deterministic" in status["output"]


def test_replaying_the_same_history_yields_the_same_actions(sample: Sample) -> None:
    instance = sample.start("chain", ["p", "q"])
    sample.run_until_finished(instance)
    history = sample.host.engine.history(instance)
    orchestrator = sample.host.orchestrators["chain"]
    cut_points = [i for i, e in enumerate(history) if e["EventType"] == EventType.ORCHESTRATOR_COMPLETED]
    assert len(cut_points) == 3
    for cut in cut_points:
        fields = context_fields(instance, json.dumps(["p", "q"]), is_replaying=True)
        context = orchestration_context([json.dumps(e) for e in history[:cut]], fields)
        data, metadata = bindings.orchestration_context(orchestrator.trigger_param, context, fields)
        runs = [
            json.loads(
                bindings.returned_json(sample.run(sample.host.invoke(orchestrator, data, metadata))) or "null"
            )
            for _ in range(2)
        ]
        assert runs[0] == runs[1]
        assert runs[0]["actions"]


def test_starting_a_running_instance_id_again_is_refused(sample: Sample) -> None:
    sample.start("race", {"timeout": 60}, instance_id="dup-1")
    status, _text = sample.http("POST", "/api/start/race?id=dup-1", {"timeout": 60})
    assert status == 500  # the SDK raised on the API's 409


def test_split_orchestrator_error_reads_the_out_of_proc_state() -> None:
    error = 'Exception: boom\n\n$OutOfProcData$:{"isDone": false, "actions": []}'
    assert split_orchestrator_error(error) == ("Exception: boom", {"isDone": False, "actions": []})
    assert split_orchestrator_error("plain") == ("plain", None)


def test_sample_app_dir_is_the_one_under_tests() -> None:
    assert (SAMPLE_APP / "function_app.py").exists()
