"""``local.settings.json`` (read by the app's ``adapters.local_settings``) and ``%SETTING%``
placeholders, as ``func start`` handles them."""

import re
from collections.abc import Mapping

from adapters.local_settings import SETTINGS_FILE_VARIABLE, load_local_settings
from settings import SettingsError

__all__ = ["SETTINGS_FILE_VARIABLE", "SettingsError", "load_local_settings", "resolve"]

_PLACEHOLDER = re.compile(r"%([^%]+)%")


def resolve(value: str, env: Mapping[str, str], *, where: str) -> str:
    """Replace every ``%NAME%`` with the app setting NAME; a missing one is an error naming ``where``."""

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise SettingsError(f"{where}: app setting {name!r} (from %{name}%) is not set")
        return env[name]

    return _PLACEHOLDER.sub(substitute, value)
