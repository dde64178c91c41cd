"""``ops replay``: export Durable histories, and replay them through today's orchestrators.

    python -m ops replay export --out DIR [--name ORCHESTRATOR] [--data-dir DIR]  # devhost's task hub
    python -m ops --azd replay export --out DIR [--name ORCHESTRATOR]   # the deployment's task hub
    python -m ops replay check PATH   # a history file or a directory; through this checkout's code

Exit 1 if a history no longer replays. The file format: ``ops/replay_history.py``; the replay:
``ops/replay_check.py``.

``--azd`` reads the Azure Storage task hub's Instances and History tables in the Functions
host's storage account, as the deployer (``az login``), with the Storage Table Data Reader
roles infra/modules/operator-rbac.bicep grants on those two tables. The Durable Task Scheduler
backend has no export here: its history export is a .NET SDK feature
(Microsoft.DurableTask.ExportHistory, preview) that writes to Blob Storage, for terminal
instances only (learn.microsoft.com/azure/durable-task/scheduler/durable-task-scheduler-export-history),
and Python has no client for its history.
"""

import argparse
from pathlib import Path
from typing import Any, Protocol

from adapters.local_settings import load_local_settings
from domain.errors import DependencyUnavailable
from harness.devhost.config import DevhostConfig
from ops import azd
from ops.errors import EXIT_REFUSED, BadArgument, Refused
from ops.output import Output
from ops.replay_check import registered_orchestrators, replay
from ops.replay_history import (
    HistoryError,
    RecordedHistory,
    from_devhost,
    from_history_rows,
    read_histories,
    write_histories,
)


class AddCommand(Protocol):
    """The CLI's own helper (ops/cli.py ``command``): a subcommand that takes the common options."""

    def __call__(self, name: str, help: str, parent: Any = ..., /) -> argparse.ArgumentParser: ...


def add_arguments(replaying: argparse.ArgumentParser, add: AddCommand) -> None:
    """``replay export`` and ``replay check``."""
    subcommands = replaying.add_subparsers(dest="replay_command", required=True, parser_class=type(replaying))
    export = add("export", "write the task hub's histories as files, one per instance", subcommands)
    export.add_argument("--out", type=Path, required=True, help="the directory to write them to")
    export.add_argument("--name", action="append", help="only this orchestrator's (repeatable)")
    export.add_argument("--data-dir", type=Path, help="devhost's data directory (default $DEVHOST_DATA_DIR)")
    check = add("check", "replay recorded histories through today's orchestrators", subcommands)
    check.add_argument("path", type=Path, help="a history file, or a directory of *.json histories")


def run(args: argparse.Namespace, out: Output) -> int:
    app_dir = args.app_dir.resolve()
    try:
        if args.replay_command == "check":
            return check(args.path, app_dir, out)
        names = frozenset(args.name) if args.name else None
        if args.azd or args.azd_env:
            deployment = azd.Deployment(azd.read_values(app_dir, args.azd_env))
            histories = from_task_hub(deployment, azd.task_hub(deployment, app_dir), names)
        else:
            load_local_settings(app_dir)
            data_dir = args.data_dir or DevhostConfig.from_env(app_dir).data_dir
            histories = from_devhost(data_dir / "durable.db", names)
    except HistoryError as bad:
        raise BadArgument(str(bad)) from None
    written = write_histories(histories, args.out)
    out.show(
        "exported",
        [{"InstanceId": h.instanceId, "Name": h.orchestrator, "Events": len(h.history)} for h in histories],
        ["InstanceId", "Name", "Events"],
    )
    if not out.as_json:  # JSON is the table alone, for a script
        out.line(f"replay: {len(written)} histories in {args.out}")
    return 0


def check(path: Path, code_dir: Path, out: Output) -> int:
    histories = read_histories(path)
    if not (code_dir / "function_app.py").exists():
        raise BadArgument(f"{code_dir} has no function_app.py: run replay check in the checkout to deploy")
    orchestrators = registered_orchestrators(code_dir)
    verdicts = [replay(recorded, orchestrators) for recorded in histories]
    rows = [
        {
            "InstanceId": v.instance_id,
            "Name": v.orchestrator,
            "Deterministic": v.deterministic,
            "Event": v.event,
            "Expected": v.expected,
            "Produced": v.produced,
            "Error": v.error,
        }
        for v in verdicts
    ]
    if out.as_json:
        out.show("replay", rows, list(rows[0]))
    else:
        for verdict in verdicts:
            out.line(("ok    " if verdict.deterministic else "FAIL  ") + verdict.describe())
    failed = sum(not v.deterministic for v in verdicts)
    if not out.as_json:
        out.line(f"replay: {len(verdicts) - failed} of {len(verdicts)} histories replay deterministically")
    return EXIT_REFUSED if failed else 0


def from_task_hub(
    deployment: azd.Deployment, task_hub: str, names: frozenset[str] | None
) -> list[RecordedHistory]:
    """Every instance of the Azure Storage task hub (DurableTask.AzureStorage: ``<hub>Instances``,
    one row per instance; ``<hub>History``, a partition per instance, its rows in RowKey order)."""
    backend = deployment.values.get("DURABLE_BACKEND", "azureStorage") or "azureStorage"
    if backend != "azureStorage":
        raise BadArgument(
            f"--azd replay export reads the Azure Storage backend's task hub; DURABLE_BACKEND is "
            f"{backend}, whose history Python cannot read (docs/operating.md, replay before deploy)"
        )
    from azure.core.exceptions import AzureError, HttpResponseError  # noqa: PLC0415 - Azure only
    from azure.data.tables import TableServiceClient  # noqa: PLC0415
    from azure.identity import DefaultAzureCredential  # noqa: PLC0415

    account = deployment.value(azd.HOST_STORAGE)
    source = f"azure-storage:{account}/{task_hub}History"
    service = TableServiceClient(
        f"https://{account}.table.core.windows.net", credential=DefaultAzureCredential()
    )
    try:
        with service:
            instances = service.get_table_client(f"{task_hub}Instances").list_entities()
            history = service.get_table_client(f"{task_hub}History")
            return [
                from_history_rows(
                    dict(instance),
                    (
                        dict(row)
                        for row in history.query_entities(
                            "PartitionKey eq @id", parameters={"id": instance["PartitionKey"]}
                        )
                    ),
                    source,
                )
                for instance in instances
                if names is None or instance.get("Name") in names
            ]
    except HttpResponseError as error:
        if error.status_code == 403:
            raise Refused(f"{account} refused the deployer (Storage Table Data Reader): {error}") from None
        raise DependencyUnavailable("task hub's History table", str(error)) from None
    except AzureError as error:
        raise DependencyUnavailable("task hub's History table", str(error)) from None
