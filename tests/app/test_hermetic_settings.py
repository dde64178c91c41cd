"""No test reads a developer's local.settings.json: a foreign settings file where the app runs
from (the sample's, as docs/deploying.md's "Run with Core Tools" makes it, pointing every store at
emulators that are not running) leaves the fast tier's app exactly as the test set it up."""

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from adapters.local_settings import SETTINGS_FILE_VARIABLE, load_local_settings
from domain.states import ProcessState
from harness.tools.deploy_package import build
from settings import SettingsError
from tests.support.app import ROOT, start_app, submission

# Settings the sample sets and the embedded profile leaves unset: what a foreign file would fill.
SAMPLE = json.loads((ROOT / "local.settings.sample.json").read_text())["Values"]
FOREIGN_ONLY = ("LeaseStorageConnection", "CompensationLogConnection", "CosmosDBConnection", "SqlConnection")


@pytest.fixture
def root_with_foreign_settings(tmp_path: Path) -> Path:
    """The app's package, as the tests run it from the repository root, with the sample's
    settings as its local.settings.json."""
    root = tmp_path / "root"
    build(ROOT, root)
    shutil.copytree(
        ROOT / "harness" / "emulators" / "servicebus-config",
        root / "harness" / "emulators" / "servicebus-config",
    )  # devhost's queue declarations
    shutil.copy2(ROOT / "local.settings.sample.json", root / "local.settings.json")
    return root


def test_the_suite_names_no_settings_file() -> None:
    assert os.environ[SETTINGS_FILE_VARIABLE] == ""


def test_the_foreign_file_would_be_read_without_the_guard(root_with_foreign_settings: Path) -> None:
    """The control: the file is one the loader reads, so the next test's outcome is the guard's."""
    loaded = load_local_settings(root_with_foreign_settings, {})
    assert {name: loaded[name] for name in FOREIGN_ONLY} == {name: SAMPLE[name] for name in FOREIGN_ONLY}


def test_a_foreign_settings_file_at_the_root_leaves_the_app_unchanged(
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    root_with_foreign_settings: Path,
) -> None:
    for name in FOREIGN_ONLY:
        monkeypatch.delenv(name, raising=False)
    app = start_app(loop, tmp_path, monkeypatch, app_dir=root_with_foreign_settings)
    try:
        assert [name for name in FOREIGN_ONLY if name in os.environ] == []
        app.submit(submission("order-1"))
        app.run_until_terminal("order-1")
        assert app.record("order-1").ProcessState is ProcessState.PROCESSED
    finally:
        app.stop()


def test_a_named_settings_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        load_local_settings(tmp_path, {SETTINGS_FILE_VARIABLE: str(tmp_path / "absent.json")})
