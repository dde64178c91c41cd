"""What Azure would run: the deployment package, installed from requirements.txt alone into a
fresh Python 3.13 venv, indexed by the real Functions worker it pins; and devhost refusing an app
that worker refuses."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrators import first_engine
from tools.deploy_package import build

ROOT = Path(__file__).resolve().parents[2]
PROTOBUF = re.search(r"^protobuf==\S+$", (ROOT / "requirements-dev.txt").read_text(), re.M)

# Every function: its trigger, and the trigger's settings as Azure's host reads them (queues and
# schedules as %SETTING% placeholders the host resolves from app settings).
EXPECTED: dict[str, tuple[str, dict[str, Any]]] = {
    "post_order": ("httpTrigger", {"route": "orders", "methods": ["POST"], "authLevel": "FUNCTION"}),
    "get_order": ("httpTrigger", {"route": "orders/{order_id}", "methods": ["GET"], "authLevel": "FUNCTION"}),
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
WITH_DURABLE_CLIENT = {"starter", "agent_reply", "submit_order", "supervisor"}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("package")
    build(ROOT, dest)
    return dest


@pytest.fixture(scope="module")
def deployed_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """requirements.txt alone, as the platform's remote build installs it, plus the protobuf the
    platform's proxy worker brings (devhost's protocol module stands in for the proxy's)."""
    assert PROTOBUF is not None
    venv = tmp_path_factory.mktemp("deployed-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(ROOT / "requirements.txt"),
            PROTOBUF.group(0),
        ],
        check=True,
        capture_output=True,
    )
    return venv


def _harness(tmp: Path) -> Path:
    """devhost's worker driver and protocol module, and nothing else of the repository."""
    harness = tmp / "harness"
    for relative in (
        "devhost/__init__.py",
        "devhost/worker.py",
        "devhost/protocol/__init__.py",
        "devhost/protocol/build.py",
        "devhost/protocol/function_rpc.proto",
        "devhost/protocol/function_rpc_pb2.py",
        "devhost/protocol/function_rpc_pb2.pyi",
    ):
        (harness / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, harness / relative)
    return harness


def test_the_real_worker_loads_every_function_of_the_deployment_package(
    package: Path, deployed_venv: Path, tmp_path: Path
) -> None:
    assert not (package / "tests").exists() and not (package / ".venv").exists()  # .funcignore applies
    assert (sys.version_info.major, sys.version_info.minor) == (3, 13)
    harness = _harness(tmp_path)
    indexed = subprocess.run(
        [str(deployed_venv / "bin" / "python"), "-m", "devhost.worker", str(package)],
        check=False,
        cwd=harness,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(harness)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert indexed.returncode == 0, indexed.stderr
    functions = {f["name"]: f["bindings"] for f in json.loads(indexed.stdout)}
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
    source = (app / "function_app.py").read_text()
    refused = source.replace(
        "def read_order(payload: contracts.JsonObject)", "def read_order(payload: dict[str, Any])"
    )
    assert refused != source
    (app / "function_app.py").write_text("from typing import Any\n" + refused)
    shutil.copy2(ROOT / "local.settings.embedded.json", app / "local.settings.json")
    started = subprocess.run(
        [sys.executable, "-m", "devhost", "start", "--app-dir", str(app), "--port", "0"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 2, started.stdout + started.stderr
    assert "cannot load the read_order function" in started.stderr
    assert "invalid non-type annotation dict[str, typing.Any]" in started.stderr
