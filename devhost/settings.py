"""``local.settings.json`` and ``%SETTING%`` placeholders, as ``func start`` handles them."""

import json
import os
import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path

_PLACEHOLDER = re.compile(r"%([^%]+)%")


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


def resolve(value: str, env: Mapping[str, str], *, where: str) -> str:
    """Replace every ``%NAME%`` with the app setting NAME; a missing one is an error naming ``where``."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise SettingsError(f"{where}: app setting {name!r} (from %{name}%) is not set")
        return env[name]

    return _PLACEHOLDER.sub(substitute, value)
