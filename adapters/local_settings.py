"""``local.settings.json``: its ``Values`` fill the environment gaps, as ``func start`` does.

The app's tools (the agent, the operator CLI) and devhost read the same file, so they agree on
queues and paths when run side by side on one machine. In Azure there is no such file and this
does nothing.
"""

import json
import os
from collections.abc import MutableMapping
from pathlib import Path


class SettingsError(ValueError):
    pass


def load_local_settings(app_dir: Path, environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Put ``Values`` of ``local.settings.json`` into the environment; real env vars win, as in func."""
    env = os.environ if environ is None else environ
    path = app_dir / "local.settings.json"
    if not path.exists():
        return {}
    try:
        values = json.loads(path.read_text()).get("Values", {})
    except json.JSONDecodeError as error:
        raise SettingsError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(values, dict):
        raise SettingsError(f"{path}: 'Values' must be an object")
    loaded = {str(k): str(v) for k, v in values.items()}
    for key, value in loaded.items():
        env.setdefault(key, value)
    return loaded
