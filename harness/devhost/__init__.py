"""devhost: a local stand-in for the Azure Functions host and the Durable Functions extension.

It runs a Python function app (``function_app.py``) through the real Functions Python worker, in
process, on its HTTP, Service Bus, timer, orchestration and activity triggers, with a Durable task
hub in SQLite. ``python -m harness.devhost start`` serves an app as ``func start`` does; tests drive a
``Host`` on a ``VirtualClock`` with ``run_until``. See ``harness/devhost/README.md``.

The public API::

    from harness.devhost import Host, VirtualClock

    host = Host(app_dir, clock=VirtualClock(), data_dir=tmp)
    await host.start()
    await host.run_until(lambda: host.engine.status(instance_id)["runtimeStatus"] == "Completed")
    await host.stop()

Names are imported on first use, so importing a light module (``harness.devhost.config``) does not load
the worker, aiohttp and the Durable SDK.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.devhost.clock import SystemClock, VirtualClock
    from harness.devhost.host import ExtraSource, Host, HostError, Idle
    from harness.devhost.indexing import IndexingError
    from harness.devhost.settings import SettingsError

_EXPORTS = {
    "Host": "harness.devhost.host",
    "HostError": "harness.devhost.host",
    "Idle": "harness.devhost.host",
    "ExtraSource": "harness.devhost.host",
    "IndexingError": "harness.devhost.indexing",
    "SettingsError": "harness.devhost.settings",
    "SystemClock": "harness.devhost.clock",
    "VirtualClock": "harness.devhost.clock",
}

__all__ = [
    "ExtraSource",
    "Host",
    "HostError",
    "Idle",
    "IndexingError",
    "SettingsError",
    "SystemClock",
    "VirtualClock",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'devhost' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
