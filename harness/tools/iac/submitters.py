"""``SAS_SUBMITTERS``, the app's registry of submitting apps: comma-separated ``name=clientId``
pairs (domain/apps.py ``Registry.parse``), e.g. ``app-a=1111...,app-b=2222...``. Each app's
private status queue is ``status-<name>``."""

import re
from typing import Any

from harness.tools.iac import policy

GUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
NAME = re.compile(policy.SUBMITTER_NAME)
FORMAT = "comma-separated name=clientId pairs (a registered name, an Entra application ID)"


def parse(value: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(the ``(name, clientId)`` pairs, what is wrong with the text). Empty text: no apps."""
    pairs: list[tuple[str, str]] = []
    errors: list[str] = []
    if not value.strip():
        return pairs, errors
    for raw in value.split(","):
        item = raw.strip()
        name, sep, client_id = (part.strip() for part in item.partition("="))
        if not sep:
            errors.append(f"'{item}' is not name=clientId" if item else "an empty item")
            continue
        if not NAME.fullmatch(name):
            errors.append(f"'{name}' is not a registered name ({policy.SUBMITTER_NAME})")
        if not GUID.fullmatch(client_id):
            errors.append(f"the client ID of '{name}' is '{client_id}', not a GUID")
        pairs.append((name, client_id))
    for label, keys in (("name", [n for n, _ in pairs]), ("client ID", [c.lower() for _, c in pairs])):
        errors.extend(
            f"the {label} '{key}' is listed twice" for key in sorted({k for k in keys if keys.count(k) > 1})
        )
    return pairs, errors


def status_queues(value: Any) -> list[str]:
    """The status queues a value of SAS_SUBMITTERS names (none when it is not known offline)."""
    if not isinstance(value, str):
        return []
    return [f"{policy.STATUS_QUEUE_PREFIX}{name}" for name, _ in parse(value)[0]]
