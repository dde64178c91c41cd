"""Messaging for the embedded profile: devhost's local Service Bus (SQLite), shared by the
Function App, the agent worker processes and the tests."""

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from devhost.servicebus import LocalServiceBus


class LocalMessaging:
    """MessageSender and MessageSettlement over one local Service Bus file."""

    def __init__(self, path: str | Path, clock: Callable[[], datetime]) -> None:
        # The app's clock: under devhost's virtual clock, message times must be virtual too.
        self.bus = LocalServiceBus(path, clock=clock)

    def send(
        self,
        queue: str,
        body: str,
        *,
        message_id: str,
        correlation_id: str | None = None,
        properties: dict[str, str] | None = None,
    ) -> None:
        self.bus.send(
            queue,
            body,
            message_id=message_id,
            correlation_id=correlation_id,
            content_type="application/json",
            application_properties=properties or {},
        )

    def dead_letter(self, queue: str, lock_token: str, reason: str, description: str) -> None:
        self.bus.dead_letter_by_lock_token(queue, lock_token, reason, description)

    def close(self) -> None:
        self.bus.close()
