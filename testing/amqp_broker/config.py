"""Queue settings read from the Service Bus emulator's ``Config.json``.

The same file configures devhost and the official emulator, so the broker reads it too; only
the properties the broker honours are kept.
"""

import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from devhost.config import parse_duration


@dataclass(frozen=True)
class QueueSettings:
    name: str
    max_delivery_count: int = 10
    lock_duration: timedelta = timedelta(minutes=1)
    duplicate_detection_window: timedelta | None = None
    default_message_ttl: timedelta | None = None
    dead_letter_on_expiration: bool = False

    def __post_init__(self) -> None:
        # Entity names are case-insensitive in Service Bus; the broker keys them lower-case.
        object.__setattr__(self, "name", self.name.strip().lower())
        if not self.name or "/" in self.name or "$" in self.name:
            raise ValueError(f"invalid queue name {self.name!r}")
        if self.max_delivery_count < 1:
            raise ValueError(f"{self.name}: MaxDeliveryCount must be at least 1")
        if self.lock_duration <= timedelta(0):
            raise ValueError(f"{self.name}: LockDuration must be positive")


def queues_from_config(document: dict[str, Any]) -> list[QueueSettings]:
    """Every queue of every namespace; topics are not supported and are refused loudly."""
    queues = []
    for namespace in document.get("UserConfig", {}).get("Namespaces", []):
        if namespace.get("Topics"):
            raise ValueError("the test broker supports queues only, not topics")
        for queue in namespace.get("Queues", []):
            props: dict[str, Any] = queue.get("Properties", {})
            if props.get("RequiresSession"):
                raise ValueError(f"{queue['Name']}: the test broker does not support sessions")
            window = None
            if props.get("RequiresDuplicateDetection"):
                window = parse_duration(str(props.get("DuplicateDetectionHistoryTimeWindow", "PT10M")))
            ttl = props.get("DefaultMessageTimeToLive")
            queues.append(
                QueueSettings(
                    name=str(queue["Name"]),
                    max_delivery_count=int(props.get("MaxDeliveryCount", 10)),
                    lock_duration=parse_duration(str(props.get("LockDuration", "PT1M"))),
                    duplicate_detection_window=window,
                    default_message_ttl=parse_duration(str(ttl)) if ttl else None,
                    dead_letter_on_expiration=bool(props.get("DeadLetteringOnMessageExpiration", False)),
                )
            )
    return queues


def load_queues(path: Path) -> list[QueueSettings]:
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot read the Service Bus config {path}: {error}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a JSON object with UserConfig.Namespaces")
    return queues_from_config(document)
