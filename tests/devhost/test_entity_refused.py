"""An app with an entity function is refused with one line and exit code 2, like devhost's other
start-up errors, and its worker processes are stopped before the event loop closes (no
"Event loop is closed" tracebacks from their finalizers)."""

from pathlib import Path

import pytest

from tests.support.devhost_cli import devhost_start

pytestmark = pytest.mark.processes  # python -m harness.devhost start

ENTITY_APP = Path(__file__).parent / "entity_app"


def test_an_entity_app_is_refused_in_one_line_with_exit_code_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOCAL_SETTINGS_FILE", str(ENTITY_APP / "local.settings.json"))
    result = devhost_start(ENTITY_APP, "--data-dir", str(tmp_path / "data"), "--port", "0")
    assert result.returncode == 2, result.stderr
    # The worker's own log lines are timestamped; devhost's refusal is the one "devhost:" line.
    refusals = [line for line in result.stderr.splitlines() if line.startswith("devhost:")]
    assert refusals == [
        "devhost: function counter: devhost does not support the trigger 'entityTrigger' "
        "(supported: activityTrigger, httpTrigger, orchestrationTrigger, serviceBusTrigger, timerTrigger)"
    ]
    assert "Traceback" not in result.stderr and "Event loop is closed" not in result.stderr
