"""``python -m ops --azd smoke`` against a real deployment: one order as the sample app, through
the deployed front end, to ``completed`` on the sample app's status queue, then its state record
with ``ops --azd status``. It needs Azure: an azd
environment that ``azd up`` deployed, named in ``SAS_TEST_AZD_ENV``, and the deployer's
``az login``; without them it is skipped (tests/unit/test_ops_azd.py covers the rest)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENT = os.environ.get("SAS_TEST_AZD_ENV", "")

# Minutes against a deployment, in a child process: never in the fast tier, even with the
# environment named.
pytestmark = [pytest.mark.processes, pytest.mark.slow]


# Exactly what is missing, named in the skip: no CI machine has a deployment or azd.
MISSING_AZURE = "; ".join(
    what
    for what, missing in (
        ("needs Azure: no deployed azd environment named in SAS_TEST_AZD_ENV", not ENVIRONMENT),
        ("needs the Azure Developer CLI: azd is not on PATH", shutil.which("azd") is None),
    )
    if missing
)


@pytest.mark.skipif(bool(MISSING_AZURE), reason=MISSING_AZURE or "needs Azure")
def test_smoke_completes_an_order_on_the_deployment() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ops", "--azd-env", ENVIRONMENT, "smoke", "--timeout", "300"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(line.startswith("smoke: token: App=") for line in lines)
    assert any(line.startswith("smoke: submitted: OrderID=smoke-") for line in lines)
    assert lines[-1].startswith("smoke: ok:")

    # The same order read from the stores as the deployer (operator-rbac.bicep's roles).
    submitted = next(line for line in lines if line.startswith("smoke: submitted: OrderID="))
    order_id = submitted.removeprefix("smoke: submitted: OrderID=").split(",")[0]
    status = subprocess.run(
        [sys.executable, "-m", "ops", "--azd-env", ENVIRONMENT, "--json", "status", order_id],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert '"ProcessState": "Processed"' in status.stdout
