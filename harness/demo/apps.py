"""The demo's two submitting apps: each posts orders to the front end and listens on its own
private status queue (E1, E16), backing off when the API answers 429 (C3)."""

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from adapters.servicebus.local_bus import LocalServiceBus
from domain.messages import OrderLine, OrderSubmission
from ops.tokens import TokenError

TERMINAL = {"completed", "failed", "compensated", "compensation-failed"}


def make_order(order_id: str, sku: str) -> OrderSubmission:
    price = Decimal("12.50")
    return OrderSubmission(
        OrderID=order_id,
        Customer="Contoso",
        Lines=[OrderLine(Sku=sku, Quantity=2, UnitPrice=price)],
        Total=price * 2,
        SubmittedAt=datetime.now(UTC),
    )


@dataclass
class SubmittingApp:
    name: str
    client_id: str  # its Entra application ID, registered in SAS_SUBMITTERS
    api: str
    bus_path: str
    orders: list[OrderSubmission]
    token: Callable[[], str]  # its access token for the front end (client credentials)
    submitted_at: dict[str, float] = field(default_factory=dict)
    finished_at: dict[str, float] = field(default_factory=dict)
    statuses: dict[str, list[str]] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)  # status messages about someone else's orders
    throttled: int = 0
    rejected: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._submit, name=f"{self.name}-submit", daemon=True),
            threading.Thread(target=self._listen, name=f"{self.name}-listen", daemon=True),
        ]
        for thread in threads:
            thread.start()
        return threads

    def stop(self) -> None:
        self._stop.set()

    def _submit(self) -> None:
        for order in self.orders:
            while not self._stop.is_set():
                status, retry_after, body = self._post(order)
                if status == 429:  # backpressure: wait as told, then try again
                    self.throttled += 1
                    self._stop.wait(retry_after)
                    continue
                if status == 202:
                    self.submitted_at[order.OrderID] = time.monotonic()
                elif status is not None:
                    self.rejected[order.OrderID] = f"HTTP {status}: {body}"
                else:
                    self._stop.wait(0.5)  # the front end is restarting: try again
                    continue
                break

    def _post(self, order: OrderSubmission) -> tuple[int | None, float, str]:
        request = urllib.request.Request(
            f"{self.api}/api/orders",
            data=order.model_dump_json(exclude={"StatusQueue"}).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            # Asked for each post, as a client-credentials library hands out its cached token.
            request.add_header("Authorization", f"Bearer {self.token()}")
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, 0.0, ""
        except urllib.error.HTTPError as error:
            return error.code, float(error.headers.get("Retry-After") or 1), error.read().decode()[:200]
        except (OSError, TokenError):  # the front end or the issuer is restarting: try again
            return None, 0.0, ""

    def _listen(self) -> None:
        bus = LocalServiceBus(self.bus_path)
        try:
            while not self._stop.is_set():
                messages = bus.receive(f"status-{self.name}", 32)
                for message in messages:
                    status = json.loads(message.body)
                    order_id, state = status["OrderID"], status["Status"]
                    if not order_id.startswith(f"{self.name}-"):
                        self.foreign.append(order_id)
                    self.statuses.setdefault(order_id, []).append(state)
                    if state in TERMINAL:
                        self.finished_at.setdefault(order_id, time.monotonic())
                    bus.complete(message)
                if not messages:
                    self._stop.wait(0.05)
        finally:
            bus.close()

    def terminal_statuses(self, order_id: str) -> list[str]:
        return [s for s in self.statuses.get(order_id, []) if s in TERMINAL]
