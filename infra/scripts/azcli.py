"""What the Entra hook scripts share (registrations.py, app_roles.py): the Azure CLI, run for its
JSON, and one way of saying that a step could not be done: what, why, the least privilege it
needs and the exact command for someone who has it, on one line.

Both run as ``python infra/scripts/<script>.py``, so this directory is first on ``sys.path``.
"""

import json
import re
import subprocess
from typing import Any

# What Microsoft Graph answers, through the Azure CLI, when the signed-in principal lacks a right
# (Authorization_RequestDenied: "Insufficient privileges to complete the operation.", HTTP 403).
REFUSED = re.compile(r"Insufficient privileges|Authorization_RequestDenied|Forbidden|\b403\b", re.IGNORECASE)
# A missing object: the CLI exits with 3 (ResourceNotFoundError) and says it does not exist.
MISSING = re.compile(r"does not exist|doesn't exist|not found|\b404\b", re.IGNORECASE)
NOT_FOUND_EXIT = 3
LONGEST_REASON = 200  # Graph's error bodies can be long JSON; the line keeps their start


class AzError(Exception):
    """A failed ``az`` command, with the CLI's last error line as its reason."""

    def __init__(self, args: tuple[str, ...], code: int, stderr: str) -> None:
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        reason = lines[-1].removeprefix("ERROR:").strip() if lines else f"exit code {code}"
        self.code = code
        self.reason = reason if len(reason) <= LONGEST_REASON else reason[:LONGEST_REASON] + "..."
        super().__init__(f"az {' '.join(args[:3])}: {self.reason}")

    @property
    def refused(self) -> bool:
        """The signed-in principal lacks the right (not a failure of the command itself)."""
        return bool(REFUSED.search(self.reason))

    @property
    def missing(self) -> bool:
        return not self.refused and (self.code == NOT_FOUND_EXIT or bool(MISSING.search(self.reason)))


def az(*args: str) -> Any:
    done = subprocess.run(["az", *args, "--output", "json"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AzError(args, done.returncode, done.stderr)
    return json.loads(done.stdout) if done.stdout.strip() else None


def refusal(step: str, what: str, reason: str, *, needed: str, command: str, meanwhile: str) -> str:
    """The one line a hook prints for a step it could not do."""
    return (
        f"{step}: could not {what} ({reason}). It needs {needed}. "
        f"Someone who has that runs: {command}. {meanwhile}"
    )
