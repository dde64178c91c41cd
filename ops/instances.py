"""``ops instances --name NAME``: the Durable orchestration instances of one orchestrator in the
given runtime statuses (Running and Pending unless told), from the Durable side, not from the
state records: the drain check before an orchestrator is removed (docs/operating.md).

Locally it asks devhost's Durable HTTP management API (``GET /runtime/webhooks/durabletask/
instances``), page by page; that API filters by runtime status but not by orchestrator name, so
the name is matched here. Against a deployment (``--azd``) it reads the task hub's Instances
table (ops/azd.py).
"""

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from domain.errors import DependencyUnavailable
from ops.output import Output

# DurableTask's OrchestrationRuntimeStatus names, as the API and the Instances table spell them.
RUNTIME_STATUSES = (
    "Running",
    "Completed",
    "ContinuedAsNew",
    "Failed",
    "Canceled",
    "Terminated",
    "Pending",
    "Suspended",
)
DEFAULT_STATUSES = ("Running", "Pending")
COLUMNS = ["InstanceId", "Name", "RuntimeStatus", "CreatedTime", "LastUpdatedTime"]
DURABLE_API = "/runtime/webhooks/durabletask/instances"
CONTINUATION_HEADER = "x-ms-continuation-token"
PAGE_SIZE = 100
HTTP_TIMEOUT_SECONDS = 30


def runtime_statuses(text: str) -> tuple[str, ...]:
    """``Running,Pending`` as the statuses' own spelling; an unknown one is a ValueError."""
    known = {s.lower(): s for s in RUNTIME_STATUSES}
    wanted = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [s for s in wanted if s.lower() not in known]
    if unknown or not wanted:
        raise ValueError(f"{', '.join(unknown) or text!r} (runtime statuses: {', '.join(RUNTIME_STATUSES)})")
    return tuple(dict.fromkeys(known[s.lower()] for s in wanted))


def devhost_url() -> str:
    """devhost's base URL, from the port it reads itself (``DEVHOST_PORT``, 7071 by default)."""
    return f"http://127.0.0.1:{os.environ.get('DEVHOST_PORT', '7071')}"


def from_durable_api(base_url: str, statuses: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """Every instance in ``statuses``, following the API's continuation tokens."""
    query = urllib.parse.urlencode({"runtimeStatus": ",".join(statuses), "top": PAGE_SIZE})
    url = f"{base_url.rstrip('/')}{DURABLE_API}?{query}"
    continuation = ""
    while True:
        request = urllib.request.Request(
            url, headers={CONTINUATION_HEADER: continuation} if continuation else {}
        )
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:
                page = json.load(response)
                continuation = response.headers.get(CONTINUATION_HEADER) or ""
        except (OSError, ValueError) as error:
            detail = f"GET {url}: {error} (is devhost running? `make run`, or --url)"
            raise DependencyUnavailable("Durable HTTP API", detail) from None
        for status in page:
            yield {
                "InstanceId": status.get("instanceId"),
                "Name": status.get("name"),
                "RuntimeStatus": status.get("runtimeStatus"),
                "CreatedTime": status.get("createdTime"),
                "LastUpdatedTime": status.get("lastUpdatedTime"),
            }
        if not continuation:
            return


def show(out: Output, name: str, statuses: tuple[str, ...], instances: Iterator[dict[str, Any]]) -> None:
    rows = sorted((i for i in instances if i["Name"] == name), key=lambda i: str(i["CreatedTime"]))
    out.show(f"Instances of {name} ({', '.join(statuses)})", rows, COLUMNS)
