"""The sample workflow (``domain.sample_workflow.WORKFLOWS``) is the one definition of its versions,
steps, remote actions and status phases: every list elsewhere that names them (the settings'
choice, the Bicep parameters, the agent's endpoints, the simulator's operations, the status
phases) is checked against it, so adding a step or a version is one definition plus the remote's
endpoint, and a list left behind fails here."""

import re
import typing
from pathlib import Path

from agent_worker.remote import ENDPOINTS
from domain.order_status import STATUS_PHASES
from domain.sample_workflow import WORKFLOWS
from domain.workflow import Runs
from settings import Settings
from simulator.app import OPERATIONS, UNDOS

REPO = Path(__file__).resolve().parents[2]
ALLOWED = re.compile(
    r"@allowed\(\[(?P<values>[^\]]*)\]\)\s*param workflowVersion string(?: = '(?P<default>\w+)')?"
)


def agent_actions() -> tuple[set[str], set[str]]:
    """The actions the Agent runs at the remote service, forward and undo, over every version."""
    forward, undo = set(), set()
    for workflow in WORKFLOWS.values():
        for step in workflow.steps:
            if step.runs is Runs.AGENT:
                forward.add(step.name)
            if step.compensation and step.compensation_runs is Runs.AGENT:
                undo.add(step.compensation)
    return forward, undo


def test_the_settings_offer_exactly_the_defined_versions() -> None:
    field = Settings.model_fields["workflow_version"]
    assert set(typing.get_args(field.annotation)) == set(WORKFLOWS)
    assert field.default in WORKFLOWS


def test_each_bicep_parameter_allows_exactly_the_defined_versions() -> None:
    for relative in ("infra/main.bicep", "infra/modules/functionapp.bicep"):
        found = ALLOWED.search((REPO / relative).read_text())
        assert found, f"{relative}: no @allowed workflowVersion parameter"
        assert set(re.findall(r"'(\w+)'", found["values"])) == set(WORKFLOWS), relative
        if found["default"] is not None:
            assert found["default"] == Settings.model_fields["workflow_version"].default, relative


def test_every_remote_action_has_an_endpoint_and_every_endpoint_an_action() -> None:
    forward, undo = agent_actions()
    assert set(ENDPOINTS) == forward | undo


def test_the_simulator_serves_every_endpoint_and_knows_which_undo() -> None:
    _, undo = agent_actions()
    paths = {action: path.removeprefix("/") for action, (_, path) in ENDPOINTS.items()}
    assert set(paths.values()) == set(OPERATIONS)
    assert {paths[action] for action in undo} == set(UNDOS)


def test_the_status_phases_are_the_statuses_the_local_actions_set() -> None:
    statuses = {a.status for w in WORKFLOWS.values() for a in w.local_actions if a.status is not None}
    assert set(STATUS_PHASES) == statuses
