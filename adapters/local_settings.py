"""``local.settings.json``: its ``Values`` fill the environment gaps, as ``func start`` does.

The app's tools (the agent, the operator CLI) and devhost read the same file, so they agree on
queues and paths when run side by side on one machine. In Azure there is no such file and this
does nothing.

``LOCAL_SETTINGS_FILE`` names the file to read instead of ``<app dir>/local.settings.json``, and
set empty, none: the test suite sets it empty so a developer's own settings file never reaches a
test (tests/conftest.py), and a test that means to read one names it.
"""

import json
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from settings import SettingsError

SETTINGS_FILE_VARIABLE = "LOCAL_SETTINGS_FILE"


def settings_path(app_dir: Path, environ: Mapping[str, str]) -> Path | None:
    """The settings file to read: ``LOCAL_SETTINGS_FILE`` if set (empty: none), else the app dir's."""
    named = environ.get(SETTINGS_FILE_VARIABLE)
    if named is None:
        return app_dir / "local.settings.json"
    return Path(named) if named else None


def load_local_settings(app_dir: Path, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put ``Values`` of ``local.settings.json`` into the environment; real env vars win, as in func."""
    env = os.environ if environ is None else environ
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
    loaded = {str(k): str(v) for k, v in values.items()}
    for key, value in loaded.items():
        env.setdefault(key, value)
    return loaded
