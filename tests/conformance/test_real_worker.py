"""What Azure would run: the deployment package, with the packages requirements.txt alone
installs, indexed by the real Functions worker it pins in a worker process of its own; and
devhost refusing an app that worker refuses."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters.local_settings import SETTINGS_FILE_VARIABLE
from harness.devhost import app_package
from harness.devhost.worker import LoadedFunction
from harness.devhost.worker_processes import WorkerProcesses
from harness.tools.deploy_package import build
from orchestrators import first_engine

# A fresh venv from pip and the real Functions worker.
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]

# Every function: its trigger, and the trigger's settings as Azure's host reads them (queues and
# schedules as %SETTING% placeholders the host resolves from app settings).
EXPECTED: dict[str, tuple[str, dict[str, Any]]] = {
    "post_order": ("httpTrigger", {"route": "orders", "methods": ["POST"], "authLevel": "ANONYMOUS"}),
    "get_order": (
        "httpTrigger",
        {"route": "orders/{order_id}", "methods": ["GET"], "authLevel": "ANONYMOUS"},
    ),
    "submit_order": (
        "serviceBusTrigger",
        {"queueName": "%SAS_ORDERS_QUEUE%", "connection": "ServiceBusConnection"},
    ),
    "agent_reply": (
        "serviceBusTrigger",
        {"queueName": "%SAS_AGENT_REPLIES_QUEUE%", "connection": "ServiceBusConnection"},
    ),
    "starter": ("timerTrigger", {"schedule": "%SAS_STARTER_SCHEDULE%", "useMonitor": False}),
    "supervisor": ("timerTrigger", {"schedule": "%SAS_SUPERVISOR_SCHEDULE%", "useMonitor": False}),
    "order_attempt": ("orchestrationTrigger", {}),
    "advance": ("activityTrigger", {}),
    **{name: ("orchestrationTrigger", {}) for name in first_engine.ORCHESTRATORS},
    **{name: ("activityTrigger", {}) for name in first_engine.ACTIVITIES},
}
WITH_DURABLE_CLIENT = {"starter", "agent_reply", "submit_order", "supervisor", "advance"}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("package")
    build(ROOT, dest)
    return dest


def _indexed(data: Path) -> list[LoadedFunction]:
    """What the worker processes devhost starts report, from the package and an environment
    of requirements.txt alone (harness/devhost/app_package.py), as the platform's host hears it."""

    async def index() -> list[LoadedFunction]:
        package = app_package.prepare(ROOT, data, os.environ, print)
        workers = WorkerProcesses(package, {"PATH": os.environ["PATH"], "HOME": str(data)})
        try:
            return await workers.start()
        finally:
            await workers.stop()

    return asyncio.run(index())


def test_the_real_worker_loads_every_function_of_the_deployment_package(tmp_path: Path) -> None:
    assert (sys.version_info.major, sys.version_info.minor) == (3, 13)
    functions = {f.name: [json.loads(raw) for raw in f.raw_bindings] for f in _indexed(tmp_path)}
    shipped = tmp_path / "wwwroot"
    assert not (shipped / "tests").exists() and not (shipped / ".venv").exists()  # .funcignore applies
    assert set(functions) == set(EXPECTED)
    for name, (trigger_type, settings) in EXPECTED.items():
        [trigger] = [b for b in functions[name] if b["type"].endswith("Trigger")]
        assert trigger["type"] == trigger_type, name
        assert trigger["direction"] == "IN", name
        assert {key: trigger.get(key) for key in settings} == settings, name
        others = {b["type"]: b["direction"] for b in functions[name] if b is not trigger}
        if trigger_type == "httpTrigger":
            assert others == {"http": "OUT"}, name
        elif name in WITH_DURABLE_CLIENT:
            assert others == {"durableClient": "IN"}, name
        else:
            assert others == {}, name


def test_devhost_refuses_an_app_the_worker_refuses_naming_the_annotation(
    package: Path, tmp_path: Path
) -> None:
    app = tmp_path / "app"
    shutil.copytree(package, app)
    source = (app / "first_engine_blueprint.py").read_text()
    refused = source.replace("def read_order(payload: JsonObject)", "def read_order(payload: dict[str, Any])")
    assert refused != source
    (app / "first_engine_blueprint.py").write_text("from typing import Any\n" + refused)
    shutil.copy2(ROOT / "local.settings.embedded.json", app / "local.settings.json")
    started = subprocess.run(
        [sys.executable, "-m", "harness.devhost", "start", "--app-dir", str(app), "--port", "0"],
        check=False,
        cwd=ROOT,
        env={**os.environ, SETTINGS_FILE_VARIABLE: str(app / "local.settings.json")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 2, started.stdout + started.stderr
    assert "cannot load the read_order function" in started.stderr
    assert "invalid non-type annotation dict[str, typing.Any]" in started.stderr
