"""devhost's own configuration: where its data lives and which queues exist.

Queues are declared in the Service Bus emulator's ``Config.json`` format, so one file serves
both devhost and users who run ``func start`` against the official emulator in Docker.
"""

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from adapters.local_settings import PATH_SETTINGS
from adapters.servicebus import limits
from adapters.servicebus.local_bus import check_queue
from adapters.servicebus.messages import QueueConfig
from harness.devhost.settings import SettingsError

_DURATION = re.compile(
    r"^P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration(text: str) -> timedelta:
    """ISO 8601 durations as the emulator's Config.json uses them (``PT1M``, ``P1DT2H``)."""
    match = _DURATION.fullmatch(text)
    if not match or text in ("P", "PT"):
        raise SettingsError(f"not an ISO 8601 duration: {text!r}")
    parts = {k: float(v) for k, v in match.groupdict().items() if v}
    return timedelta(**parts)


def queues_from_emulator_config(path: Path) -> list[QueueConfig]:
    """The queues of an emulator ``Config.json``. A value Azure Service Bus refuses (the table in
    ``adapters/servicebus/limits.py``, which the AMQP test broker's loader holds it to as well)
    stops here, in one line naming the file, the queue and the property."""
    try:
        document: dict[str, Any] = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise SettingsError(f"cannot read the Service Bus queue config {path}: {error}") from None
    queues = []
    for namespace in document.get("UserConfig", {}).get("Namespaces", []):
        for queue in namespace.get("Queues", []):
            name = str(queue.get("Name", ""))
            try:
                config = _queue(name, queue.get("Properties", {}))
            except ValueError as error:
                raise SettingsError(f"{path}: queue {name!r}: {error}") from None
            try:
                check_queue(config)
            except ValueError as error:  # it names the queue
                raise SettingsError(f"{path}: {error}") from None
            queues.append(config)
    return queues


def _queue(name: str, props: Mapping[str, Any]) -> QueueConfig:
    window = None
    if props.get("RequiresDuplicateDetection") or "DuplicateDetectionHistoryTimeWindow" in props:
        window = _duration(props, "DuplicateDetectionHistoryTimeWindow", "PT10M")
        if not props.get("RequiresDuplicateDetection"):
            # Refused even where detection is off, as the broker does: it is still part of the
            # queue's definition.
            if problem := limits.outside(limits.DUPLICATE_DETECTION_WINDOW, window):
                raise ValueError(problem)
            window = None
    ttl = props.get("DefaultMessageTimeToLive")
    count = props.get("MaxDeliveryCount", 10)
    if isinstance(count, bool) or not isinstance(count, int):
        raise ValueError(f"MaxDeliveryCount must be an integer, not {count!r}")
    if problem := limits.outside(limits.MAX_DELIVERY_COUNT, count):
        raise ValueError(problem)
    return QueueConfig(
        name=name.lower(),
        max_delivery_count=count,
        lock_duration=_duration(props, "LockDuration", "PT1M"),
        duplicate_detection_window=window,
        default_message_ttl=_duration(props, "DefaultMessageTimeToLive", "") if ttl else None,
        dead_letter_on_expiration=bool(props.get("DeadLetteringOnMessageExpiration", False)),
    )


def _duration(props: Mapping[str, Any], prop: str, default: str) -> timedelta:
    try:
        return parse_duration(str(props.get(prop, default)))
    except SettingsError as error:
        raise ValueError(f"{prop}: {error}") from None


# What the Functions host says of a host.json it cannot use, as LoadHostConfig and its
# version check in src/WebJobs.Script/Config/HostJsonFileConfigurationSource.cs of
# https://github.com/Azure/azure-functions-host word it.
_UNPARSABLE = "Unable to parse host configuration file '{path}'."
_NO_VERSION = (
    "The host.json file is missing the required 'version' property. See "
    "https://aka.ms/functions-hostjson for steps to migrate the configuration file."
)
_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.DOTALL)


def load_host_json(app_dir: Path) -> dict[str, Any]:
    """The app's ``host.json``, refused as the Functions host refuses it at start-up.

    The host parses it with Newtonsoft's ``JObject.Parse``: one JSON object, comments allowed, no
    text after it (Microsoft's own ``function_chaining`` sample ships two objects back to back,
    which the host refuses). No file means the host's default, ``{"version": "2.0"}``.
    """
    path = app_dir / "host.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {"version": "2.0"}
    except OSError as error:
        raise SettingsError(f"{_UNPARSABLE.format(path=path)} {error}") from None
    # Comments go, strings stay: the pattern matches a whole string before any "//" inside it.
    without_comments = _COMMENT.sub(lambda m: m.group(0) if m.group(0).startswith('"') else " ", text)
    try:
        document = json.loads(without_comments)
    except json.JSONDecodeError as error:
        raise SettingsError(f"{_UNPARSABLE.format(path=path)} {error}") from None
    if not isinstance(document, dict):
        raise SettingsError(f"{_UNPARSABLE.format(path=path)} The top level is not a JSON object.")
    if "version" not in document:
        raise SettingsError(_NO_VERSION)
    return document


def route_prefix(host_json: Mapping[str, Any]) -> str:
    """``extensions.http.routePrefix``, ``api`` when it is not set."""
    extensions = host_json.get("extensions") or {}
    http = extensions.get("http") if isinstance(extensions, dict) else None
    if not isinstance(http, dict):
        http = {}
    return str(http.get("routePrefix", "api")).strip("/")


# Where devhost finds an app's queue declarations unless DEVHOST_SERVICEBUS_CONFIG names a file:
# an app's own emulator config, or this repository's, which keeps it with the harness.
SERVICEBUS_CONFIGS = (
    Path("emulators") / "servicebus-config" / "Config.json",
    Path("harness") / "emulators" / "servicebus-config" / "Config.json",
)


@dataclass(frozen=True)
class DevhostConfig:
    app_dir: Path
    data_dir: Path
    servicebus_path: Path
    servicebus_config: Path | None
    port: int
    concurrency: int

    @classmethod
    def from_env(
        cls,
        app_dir: Path,
        env: Mapping[str, str] | None = None,
        *,
        data_dir: Path | None = None,
        port: int | None = None,
    ) -> "DevhostConfig":
        env = os.environ if env is None else env
        # Absolute: the workers run in the package folder, where a relative path means another file.
        data = (data_dir or Path(env.get("DEVHOST_DATA_DIR", str(app_dir / ".devhost")))).absolute()
        config = env.get("DEVHOST_SERVICEBUS_CONFIG")
        default_config = next(
            (app_dir / place for place in SERVICEBUS_CONFIGS if (app_dir / place).exists()),
            app_dir / SERVICEBUS_CONFIGS[0],
        )
        return cls(
            app_dir=app_dir,
            data_dir=data,
            servicebus_path=Path(env.get("LOCAL_SERVICEBUS_PATH", str(data / "servicebus.db"))).absolute(),
            servicebus_config=Path(config)
            if config
            else (default_config if default_config.exists() else None),
            port=int(env.get("DEVHOST_PORT", "7071")) if port is None else port,
            concurrency=int(env.get("DEVHOST_CONCURRENCY", "8")),
        )

    @property
    def package_dirs(self) -> tuple[Path, Path]:
        """What ``harness/devhost/app_package.py`` rebuilds at every start: the package and the proxy."""
        return self.data_dir / "wwwroot", self.data_dir / "worker"

    def refuse_data_in_package(self, env: Mapping[str, str]) -> None:
        """No store in a folder that the next start deletes: every order would go with it."""
        for name in PATH_SETTINGS:
            value = env.get(name)
            if not value:
                continue
            path = Path(value).absolute()
            for package in self.package_dirs:
                if path.is_relative_to(package):
                    raise SettingsError(
                        f"{name}={value} is inside {package}, which devhost rebuilds at every start: "
                        "set it to a path outside it (a relative path is taken in the app directory)"
                    )
