"""``local.settings.json``: its ``Values`` fill the environment gaps, as ``func start`` does.

The app's tools (the agent, the operator CLI) and devhost read the same file, so they agree on
queues and paths when run side by side on one machine. In Azure there is no such file and this
does nothing.

``LOCAL_SETTINGS_FILE`` names the file to read instead of ``<app dir>/local.settings.json``, and
set empty, none: the test suite sets it empty so a developer's own settings file never reaches a
test (tests/conftest.py), and a test that means to read one names it.

A relative path in a path-valued setting (``PATH_SETTINGS``) means a path in the app directory,
whoever reads it: ``func start`` runs the worker in the app directory and Azure in
``/home/site/wwwroot``, so that is what a relative path means to the app. devhost's workers run in
the package it builds (``.devhost/wwwroot``) and the tools wherever they are started, so each
resolves them here, once, before anything opens them: one set of stores for the host, its
workers, the agent and ``ops``.
"""

import json
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from settings import SettingsError

SETTINGS_FILE_VARIABLE = "LOCAL_SETTINGS_FILE"

# The settings that name a file or folder on this machine (settings.py, harness/devhost/config.py,
# harness/devhost/app_package.py, adapters/telemetry_export.py).
PATH_SETTINGS = (
    "SAS_DATA_DIR",
    "DEVHOST_DATA_DIR",
    "LOCAL_SERVICEBUS_PATH",
    "DEVHOST_SERVICEBUS_CONFIG",
    "DEVHOST_CACHE_DIR",
    "SAS_TELEMETRY_DIR",
)


def settings_path(app_dir: Path, environ: Mapping[str, str]) -> Path | None:
    """The settings file to read: ``LOCAL_SETTINGS_FILE`` if set (empty: none), else the app dir's."""
    named = environ.get(SETTINGS_FILE_VARIABLE)
    if named is None:
        return app_dir / "local.settings.json"
    return Path(named) if named else None


def load_local_settings(app_dir: Path, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put ``Values`` of ``local.settings.json`` into the environment (real env vars win, as in
    func), then make every relative path setting absolute in the app directory."""
    env = os.environ if environ is None else environ
    if not app_dir.is_dir():
        raise SettingsError(f"the app directory {app_dir} does not exist")
    loaded = _read_values(app_dir, env)
    for key, value in loaded.items():
        env.setdefault(key, value)
    resolve_paths(app_dir, env)
    return loaded


def resolve_paths(app_dir: Path, env: MutableMapping[str, str]) -> None:
    """Each relative ``PATH_SETTINGS`` value in ``env`` made absolute in ``app_dir``, and the
    SQLite ODBC driver's ``Database=`` file in ``SqlConnection`` too: it is a path as well."""
    for name in PATH_SETTINGS:
        value = env.get(name)
        if value:
            env[name] = _in_app_dir(app_dir, value)
    connection = env.get("SqlConnection")
    if connection and env.get("SAS_SQL_DIALECT") == "sqlite-odbc":
        env["SqlConnection"] = _sqlite_database_in_app_dir(app_dir, connection)


def _in_app_dir(app_dir: Path, value: str) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else app_dir.resolve() / path)


def _sqlite_database_in_app_dir(app_dir: Path, connection: str) -> str:
    """``Database=`` (any case) of an ODBC connection string, absolute; the rest as written."""
    parts = []
    for part in connection.split(";"):
        key, sep, value = part.partition("=")
        is_file = sep and key.strip().lower() == "database" and value.strip()
        parts.append(f"{key}={_in_app_dir(app_dir, value.strip())}" if is_file else part)
    return ";".join(parts)


def _read_values(app_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    path = settings_path(app_dir, env)
    if path is None:
        return {}
    if not path.exists():
        if SETTINGS_FILE_VARIABLE in env:
            raise SettingsError(f"{path} (named by {SETTINGS_FILE_VARIABLE}) does not exist")
        return {}
    try:
        settings = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"{path} cannot be read: {error}") from None
    except json.JSONDecodeError as error:
        raise SettingsError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(settings, dict):
        raise SettingsError(f"{path}: the file must hold a JSON object")
    values = settings.get("Values", {})
    if not isinstance(values, dict):
        raise SettingsError(f"{path}: 'Values' must be an object")
    return {str(k): str(v) for k, v in values.items()}
