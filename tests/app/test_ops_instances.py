"""``ops instances --name``: the drain check of an orchestrator, from devhost's Durable HTTP API —
the instances of that orchestrator only, while they run, and none once they have ended."""

import asyncio
import io
import json

import pytest
from rich.console import Console

from harness.devhost.durable_wire import FINISHED, RuntimeStatus
from ops import instances
from ops.cli import EXIT_UNAVAILABLE, EXIT_USAGE, main
from tests.support.app import App

NAMES = ("order_workflow_v1", "order_workflow_v2", "order_attempt")


def ops(app: App, *argv: str) -> tuple[int, str]:
    """``ops`` in a thread while the host's loop serves HTTP, the host not driven: the instances
    stay as they are while they are listed."""
    out = io.StringIO()

    def run() -> int:
        return main(["--json", *argv, "--url", app.host.base_url], Console(file=out, width=200))

    code = app.loop.run_until_complete(asyncio.to_thread(run))
    return code, out.getvalue()


def listed(app: App, *argv: str) -> list[dict[str, str]]:
    code, text = ops(app, "instances", *argv)
    assert code == 0, text
    rows: list[dict[str, str]] = json.loads(text)
    return rows


def test_instances_lists_one_orchestrators_instances_until_they_end(app: App) -> None:
    # Instances of no order: each ends at once (its first activity finds no record to own).
    started = {
        name: [
            app.host.engine.start(name, f"{name}-{n}", json.dumps({"OrderID": f"none-{n}"})) for n in range(3)
        ]
        for name in NAMES
    }
    for name in NAMES:
        rows = listed(app, "--name", name)
        assert sorted(r["InstanceId"] for r in rows) == started[name]
        assert {(r["Name"], r["RuntimeStatus"]) for r in rows} == {(name, "Pending")}

    ids = [i for ids in started.values() for i in ids]
    app.run_until(
        lambda: all(RuntimeStatus(app.host.engine.status(i)["runtimeStatus"]) in FINISHED for i in ids)
    )
    assert listed(app, "--name", "order_workflow_v1") == []
    ended = listed(app, "--name", "order_workflow_v1", "--status", "Completed,Failed,Terminated")
    assert sorted(r["InstanceId"] for r in ended) == started["order_workflow_v1"]


def test_every_page_of_the_api_is_read(app: App) -> None:
    many = instances.PAGE_SIZE + 5
    for n in range(many):
        app.host.engine.start("order_workflow_v1", f"v1-{n:03d}", json.dumps({"OrderID": f"none-{n}"}))
    assert len(listed(app, "--name", "order_workflow_v1")) == many


def test_an_unknown_status_or_no_devhost_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["instances", "--name", "order_workflow_v1", "--status", "Runing"])
    assert exited.value.code == EXIT_USAGE
    stderr = capsys.readouterr().err
    assert len(stderr.strip().splitlines()) == 1 and "'Runing' (runtime statuses: Running," in stderr
    out = io.StringIO()
    code = main(["instances", "--name", "x", "--url", "http://127.0.0.1:9"], Console(file=out, width=200))
    assert code == EXIT_UNAVAILABLE and len(out.getvalue().strip().splitlines()) == 1
    assert "the Durable HTTP API is unavailable" in out.getvalue()
