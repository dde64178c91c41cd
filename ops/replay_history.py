"""Recorded Durable histories: the file format ``ops replay`` writes and reads, and where the
histories come from (devhost's task hub, or a deployment's Azure Storage task hub).

One JSON file per instance (``<instance ID>.json``), so that a corpus diffs and reviews one
order at a time::

    {
      "format": "sas-durable-history/1",
      "instanceId": "o-1-1",            # the orchestration instance
      "executionId": "…",               # its execution (continue-as-new starts another)
      "orchestrator": "order_attempt",  # the registered orchestrator function it ran
      "version": "",                    # ExecutionStarted's Version (the Durable extension's)
      "runtimeStatus": "Completed",     # when it was exported
      "input": "{\"OrderID\": …}",      # the orchestration's input, as JSON text
      "source": "devhost:/…/durable.db",  # or azure-storage:<account>/<hub>History
      "recordedAt": "2026-03-01T09:00:05.000000Z",  # when it was exported (UTC)
      "history": [ … ]                  # the events, in order
    }

``history`` holds the events in the shape the Durable SDK consumes (the out-of-proc context's
``history``: PascalCase, integer ``EventType``, inputs and results as JSON text), exactly as the
task hub stored them, so a replay sees what the worker saw.
"""

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.devhost.durable_wire import EventType, format_time

FORMAT = "sas-durable-history/1"
# DurableTask.Core's EventType names, as the Azure Storage provider writes them in the History
# table's EventType column: the SDK reads the integers (durable_wire.EventType).
_EVENT_TYPES = {"".join(part.capitalize() for part in kind.name.split("_")): int(kind) for kind in EventType}
# Table Storage's own columns and the provider's row bookkeeping: not part of an event.
_TABLE_COLUMNS = frozenset({"PartitionKey", "RowKey", "Timestamp", "etag", "ExecutionId"})
# The row of a partition that holds no event: the provider's checkpoint marker
# (DurableTask.AzureStorage AzureTableTrackingStore, SentinelRowKey), skipped as it skips it.
SENTINEL_ROW_KEY = "sentinel"
# A History row whose input or result was too large for the table points at a blob instead
# (DurableTask.AzureStorage's large-message offload); a replay needs the payload itself.
_BLOB_COLUMNS = ("InputBlobName", "ResultBlobName", "ReasonBlobName", "DetailsBlobName")


class HistoryError(Exception):
    """A history that cannot be exported or read: its file or row, and why."""


@dataclass(frozen=True)
class RecordedHistory:
    instanceId: str  # the file's keys, as documented (camelCase)
    executionId: str
    orchestrator: str
    version: str
    runtimeStatus: str
    input: str | None
    source: str
    recordedAt: str
    history: list[dict[str, Any]]

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **asdict(self)}, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> "RecordedHistory":
        try:
            data = json.loads(text)
            if data.pop("format", None) != FORMAT:
                raise HistoryError(f"{where}: not a {FORMAT} file")
            return cls(**data)
        except (ValueError, TypeError) as bad:
            raise HistoryError(f"{where}: {bad}") from None


def read_histories(path: Path) -> list[RecordedHistory]:
    """One file, or every ``*.json`` of a directory, by name."""
    if not path.exists():
        raise HistoryError(f"{path}: no such file or directory")
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise HistoryError(f"{path}: no *.json histories")
    try:
        return [RecordedHistory.from_json(file.read_text(), str(file)) for file in files]
    except OSError as unreadable:
        raise HistoryError(str(unreadable)) from None


def write_histories(histories: list[RecordedHistory], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for recorded in histories:
        # An instance ID may hold any character but / \ # ? (devhost checks the same rule).
        path = directory / f"{recorded.instanceId.replace(':', '_')}.json"
        path.write_text(recorded.to_json())
        written.append(path)
    return written


def _now() -> str:
    return format_time(datetime.now(UTC))


def from_devhost(
    database: Path, names: frozenset[str] | None = None, instance_prefix: str = ""
) -> list[RecordedHistory]:
    """Every instance of devhost's task hub (``<data dir>/durable.db``; harness/devhost/durable_store.py
    has the schema) whose ID starts with ``instance_prefix``, read-only: a running host keeps
    writing it."""
    if not database.exists():
        raise HistoryError(f"{database}: no devhost task hub (has devhost run with this data dir?)")
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        instances = conn.execute(
            "SELECT instance_id, name, execution_id, status, input FROM instances"
            " WHERE substr(instance_id, 1, ?) = ? ORDER BY created_at, instance_id",
            (len(instance_prefix), instance_prefix),
        ).fetchall()
        recorded = []
        for instance_id, name, execution_id, status, input_json in instances:
            if names is not None and name not in names:
                continue
            rows = conn.execute(
                "SELECT event FROM history WHERE instance_id = ? ORDER BY seq", (instance_id,)
            ).fetchall()
            events = [json.loads(row[0]) for row in rows]
            recorded.append(
                RecordedHistory(
                    instanceId=instance_id,
                    executionId=execution_id,
                    orchestrator=name,
                    version=_version(events),
                    runtimeStatus=status,
                    input=input_json,
                    source=f"devhost:{database}",
                    recordedAt=_now(),
                    history=events,
                )
            )
        return recorded
    finally:
        conn.close()


def _version(events: list[dict[str, Any]]) -> str:
    started = next((e for e in events if e.get("EventType") == EventType.EXECUTION_STARTED), None)
    return str((started or {}).get("Version") or "")


def event_from_row(row: dict[str, Any], where: str) -> dict[str, Any]:
    """A History table row (DurableTask.AzureStorage) as the SDK's event: the EventType name as
    its integer, the event's own time (``_Timestamp``: ``Timestamp`` is the table's) as
    ``Timestamp`` (the table's own, the row's last write, where there is none), the table's
    bookkeeping columns dropped."""
    kind = _EVENT_TYPES.get(str(row.get("EventType")))
    if kind is None:
        raise HistoryError(f"{where}: event type {row.get('EventType')!r} is not one the SDK replays")
    offloaded = [column for column in _BLOB_COLUMNS if row.get(column)]
    if offloaded:
        raise HistoryError(f"{where}: {', '.join(offloaded)} in a blob: large payloads are not exported")
    event = {key: _plain(value) for key, value in row.items() if key not in _TABLE_COLUMNS}
    event["EventType"] = kind
    stamp = event.pop("_Timestamp", None) or row.get("Timestamp")
    event["Timestamp"] = _plain(stamp)
    event.setdefault("EventId", -1)
    event.setdefault("IsPlayed", True)
    return event


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_time(value if value.tzinfo else value.replace(tzinfo=UTC))
    return value


def from_history_rows(
    instance: dict[str, Any], rows: Iterator[dict[str, Any]], source: str
) -> RecordedHistory:
    """One instance from its Instances row and its History rows (one partition, by RowKey)."""
    instance_id = str(instance["PartitionKey"])
    execution_id = str(instance.get("ExecutionId") or "")
    events = [
        event_from_row(row, f"{source} {instance_id}/{row.get('RowKey')}")
        for row in rows
        # A partition keeps the rows of earlier executions until they are purged, as the
        # provider reads it (GetHistoryEventsAsync: the sentinel skipped, one execution's rows).
        if row.get("RowKey") != SENTINEL_ROW_KEY
        and (not execution_id or row.get("ExecutionId") in (None, execution_id))
    ]
    return RecordedHistory(
        instanceId=instance_id,
        executionId=execution_id,
        orchestrator=str(instance.get("Name") or ""),
        version=str(instance.get("Version") or ""),
        runtimeStatus=str(instance.get("RuntimeStatus") or ""),
        input=instance.get("Input"),
        source=source,
        recordedAt=_now(),
        history=events,
    )
