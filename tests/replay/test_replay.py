"""Replay safety (C7, issue 41): the histories real runs recorded (tests/replay/histories/, made by
``python -m tests.replay.record``) replay through today's orchestrators, and a change that would
break an instance in flight fails the replay, naming the instance and the event."""

import asyncio
import dataclasses
import importlib.util
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import azure.durable_functions as df
import pytest
from rich.console import Console

from domain.sample_workflow import ORDER_WORKFLOW_V1
from harness.devhost.durable_wire import FINISHED, EventType
from ops import azd
from ops.cli import EXIT_REFUSED, EXIT_USAGE, main
from ops.errors import BadArgument
from ops.replay import from_task_hub
from ops.replay_check import Handle, registered_orchestrators, replay
from ops.replay_history import (
    HistoryError,
    RecordedHistory,
    event_from_row,
    from_history_rows,
    read_histories,
)
from orchestrators.first_engine import run_workflow
from tests.replay.record import HISTORIES
from tests.support.app import start_app, submission

ROOT = Path(__file__).resolve().parents[2]
CORPUS = read_histories(HISTORIES)


def ops(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), Console(file=out, width=400))
    return code, out.getvalue()


def recorded(instance_id: str) -> RecordedHistory:
    [found] = [h for h in CORPUS if h.instanceId == instance_id]
    return found


def scheduled_at(history: RecordedHistory, position: int) -> int:
    """The index in the history of its ``position``-th scheduling event (an activity or a timer)."""
    kinds = (EventType.TASK_SCHEDULED, EventType.TIMER_CREATED)
    return [i for i, e in enumerate(history.history) if e["EventType"] in kinds][position]


def copy_of(module: str, tmp_path: Path, change: Callable[[str], str]) -> ModuleType:
    """A changed copy of one of the app's modules, imported under a name of its own."""
    source = (ROOT / module).read_text()
    changed = change(source)
    assert changed != source, "the change did not apply"
    path = tmp_path / f"changed_{Path(module).stem}.py"
    path.write_text(changed)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    return copy


def orchestrator(run: Callable[[Any], Any]) -> Handle:
    """``run`` registered as the SDK's decorator registers an orchestrator."""
    handle: Handle = df.Orchestrator.create(run)
    return handle


def test_the_corpus_covers_each_orchestrator_and_scenario() -> None:
    assert len(CORPUS) >= 5
    assert {h.orchestrator for h in CORPUS} >= {"order_attempt", "order_workflow_v1"}
    assert {h.runtimeStatus for h in CORPUS} == {"Completed"}
    raised = [e for h in CORPUS for e in h.history if e["EventType"] == EventType.EVENT_RAISED]
    fired = [e for h in CORPUS for e in h.history if e["EventType"] == EventType.TIMER_FIRED]
    assert raised and fired  # replies that won their race, and timers that won theirs


def test_every_recorded_history_replays_through_todays_orchestrators() -> None:
    orchestrators = registered_orchestrators(ROOT)
    verdicts = [replay(history, orchestrators) for history in CORPUS]
    assert [v.describe() for v in verdicts if not v.deterministic] == []


def test_ops_replay_check_passes_the_corpus() -> None:
    code, text = ops("replay", "check", str(HISTORIES))
    assert code == 0, text
    assert f"{len(CORPUS)} of {len(CORPUS)} histories replay deterministically" in text


def test_reordering_two_steps_of_the_first_engine_fails_at_the_first_moved_call() -> None:
    validate, reserve, *rest = ORDER_WORKFLOW_V1.steps
    swapped = dataclasses.replace(ORDER_WORKFLOW_V1, steps=(reserve, validate, *rest))

    def changed(context: df.DurableOrchestrationContext):  # type: ignore[no-untyped-def]
        return (yield from run_workflow(context, swapped))

    history = recorded("first-1-1")
    verdict = replay(history, {"order_workflow_v1": orchestrator(changed)})
    assert not verdict.deterministic
    # read_order, then ValidateOrder's run_local_step: the second call is the first that moved.
    assert verdict.event == scheduled_at(history, 1)
    assert (verdict.expected, verdict.produced) == ('activity "run_local_step"', 'activity "begin_step"')
    assert verdict.describe().startswith(f"first-1-1 (order_workflow_v1): history event {verdict.event} ")


# The SDK warns when a recorded result meets no task of the changed code: the divergence itself.
@pytest.mark.filterwarnings("ignore:Potential duplicate Task completion:UserWarning")
def test_adding_a_call_to_the_attempt_fails_at_the_event_it_displaces(tmp_path: Path) -> None:
    first_call = "    result = yield from call(context, ADVANCE, start)\n"
    attempt = copy_of(
        "orchestrators/order_attempt.py",
        tmp_path,
        lambda source: source.replace(
            first_call, first_call + "    yield from call(context, ADVANCE, start)\n"
        ),
    )

    def changed(context: df.DurableOrchestrationContext):  # type: ignore[no-untyped-def]
        return (yield from attempt.run_attempt(context))

    history = recorded("happy-1-1")
    verdict = replay(history, {"order_attempt": orchestrator(changed)})
    assert not verdict.deterministic
    # The history's second decision was the step's timer; the copy asks for advance again.
    assert verdict.event == scheduled_at(history, 1)
    assert (verdict.expected, verdict.produced) == ("timer", 'activity "advance"')
    assert "happy-1-1" in verdict.describe() and f"history event {verdict.event}" in verdict.describe()


def test_ops_replay_check_exits_1_and_names_the_instance_and_event_of_a_changed_history(
    tmp_path: Path,
) -> None:
    history = recorded("refused-1-1")
    changed = json.loads(history.to_json())
    index = scheduled_at(history, 0)
    changed["history"][index]["Name"] = "advance_v0"  # as if the code had renamed the activity since
    (tmp_path / "refused-1-1.json").write_text(json.dumps(changed))
    shutil.copy(HISTORIES / "happy-1-1.json", tmp_path)
    code, text = ops("replay", "check", str(tmp_path))
    assert code == EXIT_REFUSED, text
    assert "ok    happy-1-1 (order_attempt): replays deterministically" in text
    assert (
        f'FAIL  refused-1-1 (order_attempt): history event {index} recorded activity "advance_v0"; '
        'the orchestrator now asks for activity "advance"'
    ) in text
    assert "1 of 2 histories replay deterministically" in text


def test_an_instance_of_an_orchestrator_no_longer_registered_fails() -> None:
    verdict = replay(dataclasses.replace(recorded("first-1-1"), orchestrator="order_workflow_v0"), {})
    assert not verdict.deterministic and verdict.error == "no orchestrator 'order_workflow_v0' in the app"


def test_a_completed_instance_whose_code_now_stops_short_fails_at_its_end() -> None:
    history = recorded("happy-1-1")

    def stops(context: df.DurableOrchestrationContext):  # type: ignore[no-untyped-def]
        yield context.call_activity("advance", "{}")
        return "done"

    verdict = replay(history, {"order_attempt": orchestrator(stops)})
    assert not verdict.deterministic
    assert (verdict.event, verdict.expected, verdict.produced) == (
        scheduled_at(history, 1),
        "timer",
        "nothing more",
    )


def test_a_file_not_in_the_format_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"instanceId": "x"}')
    code, text = ops("replay", "check", str(tmp_path))
    assert code == EXIT_USAGE and "not a sas-durable-history/1 file" in text
    (tmp_path / "empty").mkdir()
    with pytest.raises(HistoryError, match=r"no \*\.json histories"):
        read_histories(tmp_path / "empty")
    with pytest.raises(HistoryError, match="no such file or directory"):
        read_histories(tmp_path / "gone")


def test_a_history_table_row_becomes_the_event_the_sdk_reads() -> None:
    row = {
        "PartitionKey": "o-1-1",
        "RowKey": "0000000000000002",
        "Timestamp": "2026-03-01T09:00:01Z",
        "ExecutionId": "e1",
        "EventType": "TaskScheduled",
        "EventId": 0,
        "IsPlayed": False,
        "_Timestamp": "2026-03-01T09:00:00.5Z",
        "Name": "advance",
        "Input": "{}",
    }
    assert event_from_row(row, "History o-1-1/2") == {
        "EventType": int(EventType.TASK_SCHEDULED),
        "EventId": 0,
        "IsPlayed": False,
        "Timestamp": "2026-03-01T09:00:00.5Z",
        "Name": "advance",
        "Input": "{}",
    }
    with pytest.raises(HistoryError, match="InputBlobName"):
        event_from_row({**row, "InputBlobName": "o-1-1/big.json.gz"}, "History o-1-1/2")
    with pytest.raises(HistoryError, match="'Nonsense'"):
        event_from_row({**row, "EventType": "Nonsense"}, "History o-1-1/2")


def test_ops_replay_export_writes_what_devhost_ran_and_it_replays(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = start_app(loop, tmp_path, monkeypatch)
    try:
        app.submit(submission("export-1"))
        app.run_until_terminal("export-1")
        store = app.host.engine.store
        app.run_until(lambda: all(i.status in FINISHED for i in store.instances()))
        stored = store.history("export-1-1")
    finally:
        app.stop()
    out = tmp_path / "exported"
    code, text = ops("replay", "export", "--data-dir", str(tmp_path / "devhost"), "--out", str(out))
    assert code == 0, text
    [exported] = read_histories(out)
    assert (exported.instanceId, exported.orchestrator, exported.runtimeStatus) == (
        "export-1-1",
        "order_attempt",
        "Completed",
    )
    assert [json.dumps(e) for e in exported.history] == stored  # the events exactly as stored
    assert ops("replay", "check", str(out))[0] == 0
    code, text = ops("--json", "replay", "check", str(out))
    assert code == 0 and [(r["InstanceId"], r["Deterministic"]) for r in json.loads(text)] == [
        ("export-1-1", True)
    ]
    code, text = ops("--json", "replay", "export", "--data-dir", str(tmp_path / "devhost"), "--out", str(out))
    assert code == 0 and [row["InstanceId"] for row in json.loads(text)] == ["export-1-1"]


def test_azd_export_reads_the_azure_storage_task_hub_only() -> None:
    with pytest.raises(BadArgument, match="DURABLE_BACKEND is durableTaskScheduler"):
        from_task_hub(azd.Deployment({"DURABLE_BACKEND": "durableTaskScheduler"}), "hub", None)
    with pytest.raises(BadArgument, match="no AZURE_HOST_STORAGE_ACCOUNT_NAME"):
        from_task_hub(azd.Deployment({}), "hub", None)


def test_an_instance_from_its_table_rows_skips_the_sentinel_and_earlier_executions() -> None:
    def row(key: str, execution: str, kind: str, **fields: object) -> dict[str, object]:
        base = {"PartitionKey": "o-1-1", "RowKey": key, "ExecutionId": execution, "EventType": kind}
        return base | {"_Timestamp": "2026-03-01T09:00:00Z", **fields}

    rows = [
        row("0000000000000000", "e2", "ExecutionStarted", Name="order_attempt", Input="{}"),
        row("0000000000000001", "e2", "TaskScheduled", EventId=0, Name="advance"),
        row("0000000000000000", "e1", "ExecutionStarted", Name="order_attempt"),
        {"PartitionKey": "o-1-1", "RowKey": "sentinel", "ExecutionId": "e2", "IsCheckpointComplete": True},
    ]
    instance = {
        "PartitionKey": "o-1-1",
        "ExecutionId": "e2",
        "Name": "order_attempt",
        "RuntimeStatus": "Running",
    }
    recorded = from_history_rows(instance, iter(rows), "azure-storage:acct/hubHistory")
    assert [(e["EventType"], e.get("Name")) for e in recorded.history] == [
        (int(EventType.EXECUTION_STARTED), "order_attempt"),
        (int(EventType.TASK_SCHEDULED), "advance"),
    ]
    assert (recorded.orchestrator, recorded.runtimeStatus, recorded.executionId) == (
        "order_attempt",
        "Running",
        "e2",
    )
