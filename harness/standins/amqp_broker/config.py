"""Queue settings read from the Service Bus emulator's ``Config.json``.

The same file configures devhost and the official emulator, so the broker reads it too; only
the properties the broker honours are kept. Values that an Azure Service Bus Standard namespace
refuses (``limits``) stop the broker at start-up, naming the queue and the property.
"""

import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from harness.devhost.config import parse_duration
from harness.standins.amqp_broker import limits


def iso_duration(value: timedelta) -> str:
    """``timedelta(seconds=90)`` → ``PT1M30S``: durations in errors as Config.json spells them."""
    if value < timedelta(0):
        return "-" + iso_duration(-value)
    days, rest = divmod(value, timedelta(days=1))
    hours, rest = divmod(rest, timedelta(hours=1))
    minutes, rest = divmod(rest, timedelta(minutes=1))
    seconds = rest.total_seconds()
    date = f"{days}D" if days else ""
    time = "".join(f"{amount}{unit}" for amount, unit in ((hours, "H"), (minutes, "M")) if amount)
    time += f"{seconds:g}S" if seconds else ""
    if not date and not time:
        time = "0S"
    return "P" + date + (f"T{time}" if time else "")


def _duration_within(queue: str, prop: str, value: timedelta, low: timedelta, high: timedelta | None) -> None:
    if value < low or (high is not None and value > high):
        allowed = f"{iso_duration(low)}..{iso_duration(high)}" if high else f"at least {iso_duration(low)}"
        raise ValueError(
            f"queue {queue!r}: {prop} {iso_duration(value)} is outside what Azure Service Bus "
            f"(Standard tier) accepts: {allowed}"
        )


@dataclass(frozen=True)
class QueueSettings:
    name: str
    max_delivery_count: int = 10
    lock_duration: timedelta = timedelta(minutes=1)
    duplicate_detection_window: timedelta | None = None
    default_message_ttl: timedelta | None = None
    dead_letter_on_expiration: bool = False

    def __post_init__(self) -> None:
        written = self.name.strip()  # errors name the queue as Config.json does
        if not written or "/" in written or "$" in written:
            raise ValueError(f"invalid queue name {self.name!r}")
        low, high = limits.MAX_DELIVERY_COUNT
        if not low <= self.max_delivery_count <= high:
            raise ValueError(
                f"queue {written!r}: MaxDeliveryCount {self.max_delivery_count} is outside what Azure "
                f"Service Bus (Standard tier) accepts: {low}..{high}"
            )
        _duration_within(written, "LockDuration", self.lock_duration, *limits.LOCK_DURATION)
        if self.duplicate_detection_window is not None:
            _duration_within(
                written,
                "DuplicateDetectionHistoryTimeWindow",
                self.duplicate_detection_window,
                *limits.DUPLICATE_DETECTION_WINDOW,
            )
        if self.default_message_ttl is not None:
            _duration_within(
                written,
                "DefaultMessageTimeToLive",
                self.default_message_ttl,
                limits.DEFAULT_MESSAGE_TTL_MIN,
                None,
            )
        # Entity names are case-insensitive in Service Bus; the broker keys them lower-case.
        object.__setattr__(self, "name", written.lower())


def queues_from_config(document: dict[str, Any]) -> list[QueueSettings]:
    """Every queue of every namespace; topics are not supported and are refused loudly."""
    queues = []
    for namespace in document.get("UserConfig", {}).get("Namespaces", []):
        if namespace.get("Topics"):
            raise ValueError("the test broker supports queues only, not topics")
        for queue in namespace.get("Queues", []):
            name = str(queue["Name"])
            props: dict[str, Any] = queue.get("Properties", {})
            if props.get("RequiresSession"):
                raise ValueError(f"{name}: the test broker does not support sessions")
            window = None
            if props.get("RequiresDuplicateDetection") or "DuplicateDetectionHistoryTimeWindow" in props:
                window = _duration(name, props, "DuplicateDetectionHistoryTimeWindow", "PT10M")
                if not props.get("RequiresDuplicateDetection"):
                    # Refused even where detection is off: it is still part of the queue definition.
                    _duration_within(
                        name,
                        "DuplicateDetectionHistoryTimeWindow",
                        window,
                        *limits.DUPLICATE_DETECTION_WINDOW,
                    )
                    window = None
            ttl = props.get("DefaultMessageTimeToLive")
            try:
                max_delivery_count = int(props.get("MaxDeliveryCount", 10))
            except (TypeError, ValueError):
                raise ValueError(
                    f"queue {name!r}: MaxDeliveryCount must be an integer, not {props['MaxDeliveryCount']!r}"
                ) from None
            queues.append(
                QueueSettings(
                    name=name,
                    max_delivery_count=max_delivery_count,
                    lock_duration=_duration(name, props, "LockDuration", "PT1M"),
                    duplicate_detection_window=window,
                    default_message_ttl=_duration(name, props, "DefaultMessageTimeToLive") if ttl else None,
                    dead_letter_on_expiration=bool(props.get("DeadLetteringOnMessageExpiration", False)),
                )
            )
    return queues


def _duration(queue: str, props: dict[str, Any], prop: str, default: str | None = None) -> timedelta:
    try:
        return parse_duration(str(props.get(prop, default)))
    except ValueError as error:
        raise ValueError(f"queue {queue!r}: {prop}: {error}") from None


def load_queues(path: Path) -> list[QueueSettings]:
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read the Service Bus config {path}: {error}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a JSON object with UserConfig.Namespaces")
    return queues_from_config(document)
