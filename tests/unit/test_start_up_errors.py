"""What a newcomer sees when the local stack cannot start or has not run: one line naming what to
do, never a traceback (`make run`'s issuer, `ops`, `ops dashboard`); and the one rule for relative
paths in the settings, shared by devhost and ops."""

import json
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.local_settings import SETTINGS_FILE_VARIABLE, load_local_settings
from adapters.servicebus.local_bus import LocalServiceBus
from adapters.servicebus.messages import QueueConfig
from harness.devhost.config import DevhostConfig
from harness.standins import local_issuer
from ops.cli import EXIT_UNAVAILABLE, EXIT_USAGE
from ops.cli import main as ops_main
from settings import SettingsError

ROOT = Path(__file__).resolve().parents[2]
AUTH = {"SAS_AUTH_TENANT_ID": "00000000-0000-4000-8000-00000000001a", "SAS_AUTH_AUDIENCE": "api"}


@pytest.fixture(autouse=True)
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What the commands put into the environment goes with the test."""
    monkeypatch.setattr(os, "environ", dict(os.environ))
    yield


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    """An app directory with the shipped embedded settings, as `make run` copies them."""
    folder = tmp_path / "app"
    folder.mkdir()
    shutil.copy(ROOT / "local.settings.embedded.json", folder / "local.settings.json")
    os.environ.pop(SETTINGS_FILE_VARIABLE, None)
    return folder


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def test_relative_paths_in_the_settings_are_the_app_directorys(app_dir: Path) -> None:
    env: dict[str, str] = {}
    load_local_settings(app_dir, env)
    assert env["SAS_DATA_DIR"] == str(app_dir / ".data")
    assert env["LOCAL_SERVICEBUS_PATH"] == str(app_dir / ".devhost" / "servicebus.db")
    assert DevhostConfig.from_env(app_dir, env).data_dir == app_dir / ".devhost"


def test_a_relative_sqlite_odbc_database_is_the_app_directorys(app_dir: Path) -> None:
    odbc = "Driver={SQLite3};database=.data/orders.db;Timeout=5000"
    env = {"SAS_SQL_DIALECT": "sqlite-odbc", "SqlConnection": odbc}
    load_local_settings(app_dir, env)
    assert (
        env["SqlConnection"] == f"Driver={{SQLite3}};database={app_dir / '.data' / 'orders.db'};Timeout=5000"
    )
    # Another dialect's Database= is a database's name on a server, not a file.
    server = {"SAS_SQL_DIALECT": "postgresql", "SqlConnection": "Driver={PostgreSQL Unicode};Database=orders"}
    load_local_settings(app_dir, server)
    assert server["SqlConnection"] == "Driver={PostgreSQL Unicode};Database=orders"


def test_a_store_inside_the_rebuilt_package_is_refused(app_dir: Path) -> None:
    env = {"SAS_DATA_DIR": ".devhost/wwwroot/.data"}
    load_local_settings(app_dir, env)
    with pytest.raises(SettingsError, match=r"SAS_DATA_DIR=.*rebuilds at every start"):
        DevhostConfig.from_env(app_dir, env).refuse_data_in_package(env)


def test_the_issuer_on_a_busy_port_says_the_stack_may_be_running(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        os.environ |= AUTH | {SETTINGS_FILE_VARIABLE: "", "SAS_AUTH_AUTHORITY": f"http://127.0.0.1:{port}"}
        assert local_issuer.main(["--", "true"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"127.0.0.1:{port} is taken" in line and "make run" in line


def test_the_issuer_names_a_malformed_settings_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "local.settings.json"
    broken.write_text('{"Values": {"SAS_DATA_DIR": ".data",}}')
    os.environ[SETTINGS_FILE_VARIABLE] = str(broken)
    assert local_issuer.main(["--app-dir", str(tmp_path), "--", "true"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert str(broken) in line and "is not valid JSON" in line


def test_ops_names_a_missing_app_directory(capsys: pytest.CaptureFixture[str]) -> None:
    assert ops_main(["--app-dir", "/nonexistent", "status", "o-1"]) == EXIT_USAGE
    assert "the app directory /nonexistent does not exist" in _one_line(capsys.readouterr().err)


def test_ops_before_the_first_run_says_how_to_start_the_stack(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["status", "o-1"], ["dlq", "list", "orders"], ["smoke"]):
        assert ops_main(["--app-dir", str(app_dir), *command]) == EXIT_UNAVAILABLE
        line = _one_line(capsys.readouterr().err)
        assert "has not run" in line and "make run" in line and "not declared" not in line


def test_ops_with_the_emulators_stack_running_says_which_settings_to_use(
    app_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    emulators = app_dir / ".data" / "emulators" / "local.settings.json"
    emulators.parent.mkdir(parents=True)
    emulators.write_text(json.dumps({"Values": {"SAS_PROFILE": "emulators"}}))
    assert ops_main(["--app-dir", str(app_dir), "smoke"]) == EXIT_UNAVAILABLE
    assert f"{SETTINGS_FILE_VARIABLE}={emulators}" in _one_line(capsys.readouterr().err)


def test_the_dashboard_on_a_busy_port_says_so(app_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    LocalServiceBus(
        app_dir / ".devhost" / "servicebus.db", [QueueConfig("orders")]
    ).close()  # as devhost left it
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert ops_main(["--app-dir", str(app_dir), "dashboard", "--port", str(port)]) == EXIT_USAGE
    line = _one_line(capsys.readouterr().err)
    assert f"port {port}" in line and "is taken" in line and "--port" in line
