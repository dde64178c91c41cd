"""``ops smoke``: one new order as a registered app, followed to its final status on that app's
status queue, each step printed as it happens. The same routine runs against the local stack and
against a deployment (``--azd``): what differs is injected — where the app's token comes from,
which front end takes the order, and which bus the status queue is peeked on."""

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ops import azd, queues
from ops.apps import registered
from ops.errors import BadArgument, Refused
from ops.orders import FrontEnd, local_front_end, order_body, post_order
from ops.output import Output
from ops.queues import QueueBrowser
from ops.tokens import app_token
from services.context import Ports

# The status messages after which an order's status changes no more (domain.states.OrderStatus).
FINAL_STATUSES = frozenset({"rejected", "completed", "failed", "compensated", "compensation-failed"})

# The status messages about one order on one queue, oldest first: (queue, order ID) -> bodies.
StatusReader = Callable[[str, str], list[dict[str, Any]]]


@dataclass(frozen=True)
class Smoke:
    """Where one smoke run submits and looks, for one submitting app."""

    status_queue: str  # the app's own, status-<name>
    token: Callable[[], str]  # the app's access token for the front end
    front_end: FrontEnd
    statuses: StatusReader  # peeked: the app's own receiver still gets them
    now: Callable[[], datetime]


def smoke(run: Smoke, out: Output, timeout: float, interval: float) -> None:
    """Refused unless the order completed within ``timeout`` seconds."""
    queue = run.status_queue
    order_id = f"smoke-{uuid.uuid4().hex[:12]}"  # new each run: a used ID is a conflict
    out.step("smoke", "submitted", post_order(run.front_end, run.token(), order_body(order_id, "SKU-1", 1)))
    deadline = run.now() + timedelta(seconds=timeout)
    pause = threading.Event()
    seen = 0
    while True:
        statuses = run.statuses(queue, order_id)
        for body in statuses[seen:]:
            out.step("smoke", f"status on {queue}", body)
        seen = len(statuses)
        final = next((b for b in statuses if b.get("Status") in FINAL_STATUSES), None)
        if final is not None:
            break
        if run.now() >= deadline:
            raise Refused(f"{order_id}: no final status on {queue} within {timeout:g}s")
        pause.wait(interval)
    if final["Status"] != "completed":
        raise Refused(f"{order_id} ended {final['Status']}: {final.get('Detail') or 'no detail'}")
    out.step("smoke", "ok", {"OrderID": order_id, "Status": "completed"})


def local(ports: Ports, app: str) -> Smoke:
    """Against the stores and bus the settings select, the token from the local issuer."""
    submitting = registered(ports.settings, app)
    browser = queues.browser(ports)
    return Smoke(
        status_queue=submitting.status_queue,
        token=lambda: app_token(ports.settings, submitting.name),
        front_end=local_front_end(ports),
        statuses=lambda queue, order_id: queues.bodies(browser, queue, order_id),
        now=ports.clock.now,
    )


def deployed(deployment: azd.Deployment, app: str | None, browser: QueueBrowser, out: Output) -> Smoke:
    """Against a deployment (``--azd``): as the sample app, with its certificate's token, posted
    to the deployed front end; its status queue peeked on Service Bus as the deployer. Every
    value is checked before anything is sent."""
    sample = deployment.sample_app
    if app is not None and app not in (sample.name, sample.name.removeprefix("app-")):
        raise BadArgument(f"--azd smoke submits as the sample app ({sample.name}), not {app!r}")
    scope, url = deployment.scope, deployment.orders_url
    source = azd.token_source(deployment.sample_app_credential(), scope)

    def token() -> str:
        issued = source()
        out.step("smoke", "token", {"App": sample.name, "ClientId": sample.client_id, "Scope": scope})
        return issued

    out.step("smoke", "deployment", {"FrontEnd": url, "StatusQueue": sample.status_queue})
    return Smoke(
        status_queue=sample.status_queue,
        token=token,
        front_end=azd.http_front_end(url),
        statuses=lambda queue, order_id: queues.bodies(browser, queue, order_id),
        now=lambda: datetime.now(UTC),
    )
