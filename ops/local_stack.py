"""Whether the local stack has run in this app directory: ``ops`` says so before it opens a
store or the bus, instead of answering "no order" or "queue 'orders' is not declared"."""

import contextlib
import sqlite3
from pathlib import Path

from adapters.local_settings import SETTINGS_FILE_VARIABLE
from settings import Settings

# Where `make run PROFILE=emulators` writes its settings (harness/demo/emulators.py, --workdir's default).
EMULATORS_SETTINGS = Path(".data") / "emulators" / "local.settings.json"


class NotStarted(Exception):
    """The local stack has not run here yet: the message says how to start it."""


def require_started(settings: Settings, app_dir: Path) -> None:
    """devhost declares the queues on the local bus when it starts: none there, it never ran. The
    azure profile has no local stack (on the local bus it is a settings error, said by bootstrap)."""
    if settings.profile == "azure" or not settings.uses_local_bus:
        return
    if _declared(Path(settings.local_servicebus_path), settings.orders_queue):
        return
    message = (
        f"the local stack has not run in {app_dir} yet (no queues in {settings.local_servicebus_path}): "
        'start it with `make run` (README, "Run it by hand")'
    )
    emulators = app_dir / EMULATORS_SETTINGS
    if emulators.exists():
        message += f"; for the emulators stack, set {SETTINGS_FILE_VARIABLE}={emulators}"
    raise NotStarted(message)


def _declared(bus: Path, queue: str) -> bool:
    if not bus.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{bus}?mode=ro", uri=True)) as db:
            return db.execute("SELECT 1 FROM queues WHERE name = ?", (queue,)).fetchone() is not None
    except sqlite3.Error:
        return False
