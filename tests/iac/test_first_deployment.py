"""A first deployment's options (deploySimulator, grantDeployerOperatorRoles, sampleApp): the
project checker evaluates all on, all off and the sample app alone off
(harness/tools/iac/first_deployment.py), and breaking what any needs — in a copy of the repository —
fails, naming it. The helpers are tests/support/iac.py's; the fixtures
(``clean``, ``root``) tests/iac/conftest.py's."""

from pathlib import Path

import pytest

from harness.tools.iac import policy
from tests.support.iac import assert_fails, edit, needs_bicep

ON = "[deploySimulator=true grantDeployerOperatorRoles=true sampleApp=true]"
OFF = "[deploySimulator=false grantDeployerOperatorRoles=false sampleApp=false]"
ON_DTS = ON.removesuffix("]") + " durableBackend=durableTaskScheduler]"
NO_SAMPLE = "[deploySimulator=true grantDeployerOperatorRoles=true sampleApp=false]"
BLOB_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"  # Storage Blob Data Reader: allowed, not to them
SENDER = "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39"


def containerapp(root: Path) -> Path:
    return root / "infra" / "modules" / "containerapp.bicep"


def operator_roles(root: Path) -> Path:
    return root / "infra" / "modules" / "operator-rbac.bicep"


def rbac(root: Path) -> Path:
    return root / "infra" / "modules" / "rbac.bicep"


# --- the simulator ------------------------------------------------------------------------------


@needs_bicep
@pytest.mark.parametrize(
    ("old", "new", "needles"),
    [
        ("external: false", "external: true", (ON, "'simulatorApp' has ingress.external True")),
        ("= if (deploySimulator) {", "= {", (OFF, "the simulator Container App 'simulatorApp' is deployed")),
        (
            "= if (deploySimulator) {",
            "= if (!deploySimulator) {",
            (ON, "no Container App tagged azd-service-name 'simulator' is deployed"),
        ),
        (
            "'${simulatorIdentityId}': {}",
            "'${identityId}': {}",
            (ON, "runs as the agent's or the Function App's identity"),
        ),
    ],
    ids=["external-ingress", "deployed-when-off", "missing-when-on", "agent-identity"],
)
def test_a_broken_simulator_container_app_fails(
    root: Path, clean: Path, old: str, new: str, needles: tuple[str, ...]
) -> None:
    edit(containerapp(root), old, new)
    assert_fails(root, *needles, clean=clean)


@needs_bicep
def test_the_simulator_identity_with_another_role_fails(root: Path, clean: Path) -> None:
    path = rbac(root)
    text = path.read_text()
    head, _, tail = text.rpartition("resource simulatorPull")
    path.write_text(
        head + "resource simulatorPull" + tail.replace("roles.acrPull)", "roles.storageBlobDataOwner)")
    )
    assert_fails(root, "'simulatorPull' grants the simulator's identity Storage Blob Data Owner", clean=clean)


# --- the deployer's roles -----------------------------------------------------------------------


@needs_bicep
@pytest.mark.parametrize(
    ("old", "new", "granted", "missing"),
    [
        (
            "scope: operatorAlertsQueue\n",
            "scope: namespace\n",
            "'alertsReceiver' grants the deployer Azure Service Bus Data Receiver at namespace",
            "holds no Azure Service Bus Data Receiver at operator-alerts",
        ),
        (
            "scope: taskHubInstancesTable\n",
            "scope: hostStorage\n",
            "'taskHubInstancesReader' grants the deployer Storage Table Data Reader at",
            "holds no Storage Table Data Reader at the task hub's Instances table",
        ),
    ],
    ids=["alerts-queue-on-the-namespace", "instances-table-on-the-account"],
)
def test_a_deployer_role_broader_than_its_entity_fails(
    root: Path, clean: Path, old: str, new: str, granted: str, missing: str
) -> None:
    edit(operator_roles(root), old, new)
    assert_fails(root, ON, granted, "broader than `python -m ops` needs", clean=clean)
    assert_fails(root, ON, missing, clean=clean)


@needs_bicep
def test_a_deployer_sender_on_a_status_queue_fails(root: Path, clean: Path) -> None:
    path = operator_roles(root)
    text = path.read_text()
    head, _, tail = text.partition("resource statusReceiver")
    path.write_text(
        head + "resource statusReceiver" + tail.replace("serviceBusDataReceiver", "serviceBusDataSender", 2)
    )
    assert_fails(
        root, ON, "grants the deployer Azure Service Bus Data Sender at status-sample-app", clean=clean
    )


@needs_bicep
def test_a_deployer_role_outside_the_list_fails(root: Path, clean: Path) -> None:
    edit(operator_roles(root), "'76199698-9eea-4c19-bc75-cec21354c6b6'", f"'{BLOB_READER}'")
    assert_fails(
        root, ON, "grants the deployer Storage Blob Data Reader at the compensation log", clean=clean
    )
    assert_fails(
        root, ON, "holds no Storage Table Data Reader at the compensation log table", "ops show", clean=clean
    )


@needs_bicep
@pytest.mark.parametrize(
    ("table", "needles"),
    [
        ("''", (ON, "holds no Storage Table Data Reader at the task hub's Instances table", "ops instances")),
        # The Durable Task Scheduler keeps its task hub out of storage: no Instances table to read.
        (
            "taskHubInstancesTableName",
            (
                ON_DTS,
                "'taskHubInstancesReader' grants the deployer Storage Table Data Reader at the task hub's",
            ),
        ),
    ],
    ids=["missing-on-azure-storage", "granted-on-the-durable-task-scheduler"],
)
def test_the_task_hub_reader_follows_the_durable_backend(
    root: Path, clean: Path, table: str, needles: tuple[str, ...]
) -> None:
    edit(
        root / "infra" / "main.bicep",
        "taskHubInstancesTableName: useDurableTaskScheduler ? '' : taskHubInstancesTableName",
        f"taskHubInstancesTableName: {table}",
    )
    assert_fails(root, *needles, clean=clean)


@needs_bicep
def test_the_deployer_cosmos_reader_must_stay_a_reader(root: Path, clean: Path) -> None:
    edit(
        operator_roles(root),
        "'00000000-0000-0000-0000-000000000001'",
        "'00000000-0000-0000-0000-000000000002'",
    )
    assert_fails(root, ON, "grants the deployer Cosmos DB Built-in Data Contributor at database", clean=clean)


@needs_bicep
def test_deployer_roles_with_the_option_off_fail(root: Path, clean: Path) -> None:
    edit(
        root / "infra" / "main.bicep",
        "= if (grantDeployerOperatorRoles && !empty(principalId)) {",
        "= if (!empty(principalId)) {",
    )
    assert_fails(root, OFF, "grants the deployer", "with grantDeployerOperatorRoles off", clean=clean)


# --- the sample app ------------------------------------------------------------------------------


@needs_bicep
def test_the_sample_app_queue_role_with_the_switch_off_fails(root: Path, clean: Path) -> None:
    edit(
        root / "infra" / "main.bicep",
        "statusQueueName: sampleApp ? 'status-${sampleAppName}' : ''",
        "statusQueueName: 'status-${sampleAppName}'",
    )
    assert_fails(
        root,
        NO_SAMPLE,
        "'statusReceiver' grants Azure Service Bus Data Receiver at status-sample-app with sampleApp off",
        clean=clean,
    )


@needs_bicep
def test_the_sample_app_listed_in_submitting_apps_fails(root: Path, clean: Path) -> None:
    """Listed there, the switch could not leave it out: its queue and its roles stay."""
    edit(
        root / "infra" / "main.parameters.json",
        '"submittingApps": {\n      "value": [\n',
        '"submittingApps": {\n      "value": [\n'
        '        { "name": "sample-app", "clientId": "", "principalId": "" },\n',
    )
    assert_fails(root, "submittingApps lists the sample app 'sample-app'", clean=clean)
    assert_fails(
        root, OFF, "the sample app's queue 'status-sample-app' is deployed with sampleApp off", clean=clean
    )


@needs_bicep
def test_the_sample_app_switch_must_follow_the_simulator(root: Path, clean: Path) -> None:
    edit(root / "infra" / "main.parameters.json", "${SAS_SAMPLE_APP=${SAS_DEPLOY_SIMULATOR=true}}", "true")
    assert_fails(root, 'sampleApp is "true": not defaulted to the simulator\'s variable', clean=clean)


@needs_bicep
def test_the_sample_app_missing_with_the_switch_on_fails(root: Path, clean: Path) -> None:
    edit(
        root / "infra" / "main.bicep",
        "var registeredApps = concat(sampleApps, submittingApps)",
        "var registeredApps = submittingApps",
    )
    assert_fails(root, ON, "the sample app's queue 'status-sample-app' is not deployed", clean=clean)


def test_a_deployer_sender_is_not_allowed_on_operator_alerts() -> None:
    """The allow-list itself: Send only where ops dlq resubmit sends."""
    scopes, _ = policy.OPERATOR_ROLES[SENDER]
    assert "operator-alerts" not in scopes
    assert not any(s.startswith("status-") for s in scopes)
