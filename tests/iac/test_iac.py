"""The offline IaC checks (harness/tools/iac): the real repository passes them, and breaking any one thing
on purpose — in a copy of the repository — makes them fail, naming the problem.

Each checker runs in its own venv, as `make iac` runs it; `make test` always creates both venvs
(target iac-venvs). A break is judged against the unbroken copy: the broken run must exit 1 with
a problem line the unbroken run did not have.
"""

import json
import re
from pathlib import Path

import pytest

from tests.support.iac import (
    BICEP_PYTHON,
    CHECKOV_PYTHON,
    REPO,
    assert_fails,
    declaring,
    delete_line,
    edit,
    function_app_file,
    infra_file,
    needs_bicep,
    needs_checkov,
    run,
)

# Runs the checkers in .venv-bicep and .venv-checkov (make iac-venvs).
pytestmark = pytest.mark.iac


def code_placeholders() -> list[str]:
    """The %SETTING%s of function_app.py's bindings, read from the code as the checker does."""
    return sorted(set(re.findall(r"%([A-Za-z0-9_]+)%", (REPO / "function_app.py").read_text())))


# --- the real repository ---------------------------------------------------------------------


@needs_bicep
def test_the_real_repository_passes_the_project_checker() -> None:
    code, lines = run(BICEP_PYTHON, "harness.tools.iac", REPO)
    assert code == 0, "\n".join(lines)
    assert lines[-1].startswith("iac: clean")


@needs_checkov
def test_the_real_repository_passes_checkov() -> None:
    code, lines = run(CHECKOV_PYTHON, "harness.tools.iac.checkov_check", REPO)
    assert code == 0, "\n".join(lines)
    assert lines[-1].startswith("checkov: clean")


# --- no keys, no passwords -------------------------------------------------------------------


@needs_bicep
def test_a_key_based_app_setting_fails(root: Path, clean: Path) -> None:
    app = function_app_file(root)
    line = delete_line(app, r"^\s*ServiceBusConnection__fullyQualifiedNamespace:")
    indent = line[: len(line) - len(line.lstrip())]
    edit(
        app,
        "ServiceBusConnection__credential:",
        "ServiceBusConnection: 'Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=root;"
        "SharedAccessKey=abc='\n" + indent + "ServiceBusConnection__credential:",
    )
    assert_fails(root, "SharedAccessKey", clean=clean)
    assert_fails(root, "sets ServiceBusConnection: a connection string", clean=clean)


@needs_bicep
def test_an_account_key_fails(root: Path, clean: Path) -> None:
    edit(
        function_app_file(root),
        "SAS_PROFILE: 'azure'",
        "SAS_PROFILE: 'azure'\n    CosmosDBConnection: 'AccountEndpoint=https://x/;AccountKey=abc=='",
    )
    assert_fails(root, "AccountKey=", clean=clean)
    assert_fails(root, "sets CosmosDBConnection: a connection string", clean=clean)


@needs_bicep
def test_list_keys_fails(root: Path, clean: Path) -> None:
    storage = declaring(root, "Microsoft.Storage/storageAccounts")
    text = storage.read_text()
    symbol = re.search(r"^resource (\w+) 'Microsoft.Storage/storageAccounts@", text, re.M)
    assert symbol
    storage.write_text(text + f"\noutput leaked string = {symbol.group(1)}.listKeys().keys[0].value\n")
    assert_fails(root, storage.name, "listKeys(", clean=clean)


@needs_bicep
def test_a_password_parameter_fails(root: Path, clean: Path) -> None:
    sql = declaring(root, "Microsoft.Sql/servers")
    sql.write_text("@secure()\nparam administratorLoginPassword string = ''\n" + sql.read_text())
    assert_fails(root, sql.name, "a password", clean=clean)


# --- identity-only authentication ------------------------------------------------------------


@needs_bicep
@pytest.mark.parametrize(
    ("resource_type", "old", "new", "needle"),
    [
        (
            "Microsoft.ServiceBus/namespaces",
            "disableLocalAuth: true",
            "disableLocalAuth: false",
            "disableLocalAuth",
        ),
        (
            "Microsoft.DocumentDB/databaseAccounts",
            "disableLocalAuth: true",
            "disableLocalAuth: false",
            "disableLocalAuth",
        ),
        (
            "Microsoft.Storage/storageAccounts",
            "allowSharedKeyAccess: false",
            "allowSharedKeyAccess: true",
            "allowSharedKeyAccess",
        ),
        (
            "Microsoft.Sql/servers",
            "azureADOnlyAuthentication: true",
            "azureADOnlyAuthentication: false",
            "azureADOnlyAuthentication",
        ),
        (
            "Microsoft.OperationalInsights/workspaces",
            "disableLocalAuth: true",
            "disableLocalAuth: false",
            "properties.features.disableLocalAuth is False",
        ),
        (
            "Microsoft.Insights/components",
            "DisableLocalAuth: true",
            "DisableLocalAuth: false",
            "properties.DisableLocalAuth is False",
        ),
    ],
)
def test_local_authentication_fails(
    root: Path, clean: Path, resource_type: str, old: str, new: str, needle: str
) -> None:
    edit(declaring(root, resource_type), old, new)
    assert_fails(root, needle, "must be", clean=clean)


@needs_bicep
@pytest.mark.parametrize(
    ("resource_type", "line", "needle"),
    [
        (
            "Microsoft.OperationalInsights/workspaces",
            r"^\s*disableLocalAuth: true",
            "features.disableLocalAuth",
        ),
        ("Microsoft.Insights/components", r"^\s*DisableLocalAuth: true", "properties.DisableLocalAuth"),
    ],
)
def test_monitoring_local_authentication_removed_fails(
    root: Path, clean: Path, resource_type: str, line: str, needle: str
) -> None:
    delete_line(declaring(root, resource_type), line)
    assert_fails(root, needle, "is not set, must be true", clean=clean)


@needs_bicep
def test_container_apps_logs_with_the_workspace_key_fail(root: Path, clean: Path) -> None:
    """The 'log-analytics' destination takes the workspace's shared key, which local auth off rejects."""
    path = declaring(root, "Microsoft.App/managedEnvironments")
    edit(
        path,
        "destination: 'azure-monitor'",
        "destination: 'log-analytics'\n      logAnalyticsConfiguration: {\n        customerId: 'x'\n"
        "        sharedKey: 'y'\n      }",
    )
    assert_fails(root, path.name, 'appLogsConfiguration.destination is "log-analytics"', clean=clean)
    assert_fails(root, path.name, "'sharedKey': a Log Analytics workspace shared key", clean=clean)


# --- roles -----------------------------------------------------------------------------------

SENDER = "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39"  # Azure Service Bus Data Sender
OWNER = "8e3af657-a8ff-443c-a75c-2fe8c4bcaa63"  # Owner: not least privilege


@needs_bicep
def test_a_role_outside_the_allow_list_fails(root: Path, clean: Path) -> None:
    path = infra_file(root, SENDER)
    edit(path, SENDER, OWNER, count=99)
    assert_fails(root, path.name, OWNER, "not an allowed built-in role", clean=clean)
    assert_fails(root, "grants role " + OWNER, clean=clean)


@needs_bicep
def test_a_role_assignment_without_principal_type_fails(root: Path, clean: Path) -> None:
    delete_line(infra_file(root, "principalType:"), r"^\s*principalType:")
    assert_fails(root, "does not set principalType", clean=clean)


# --- Service Bus trigger queues: Data Owner for target-based scaling, nowhere else -----------------

SB_DATA_OWNER = "090c5cfd-751d-490a-894a-3ce6f1109419"  # Azure Service Bus Data Owner
SB_RECEIVER = "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0"  # Azure Service Bus Data Receiver
EXTRA_OWNER = """
resource extraOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {{
  name: guid({scope}.id, {principal}, 'extra')
  scope: {scope}
  properties: {{
    principalId: {principal}
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '{role}')
  }}
}}
"""


def app_roles_file(root: Path) -> Path:
    """The module that assigns the Function App's and the agent's roles."""
    return infra_file(root, "param appPrincipalId ", "param agentPrincipalId ")


@needs_bicep
def test_the_function_app_needs_data_owner_on_its_trigger_queues(root: Path, clean: Path) -> None:
    """Data Owner turned into Receiver: target-based scaling could not read the queues' length."""
    edit(infra_file(root, SB_DATA_OWNER), SB_DATA_OWNER, SB_RECEIVER, count=99)
    for queue, function in (("orders", "submit_order"), ("agent-replies", "agent_reply")):
        assert_fails(
            root,
            "function_app.py",
            f"holds no Azure Service Bus Data Owner on queue '{queue}', which {function} reads",
            "target-based scaling",
            clean=clean,
        )


@needs_bicep
def test_the_function_app_needs_data_receiver_on_its_trigger_queues(root: Path, clean: Path) -> None:
    path = app_roles_file(root)
    text = path.read_text()
    match = re.search(r"scope: agentRepliesQueue\n(.*\n){3}.*roles\.serviceBusDataReceiver\)", text)
    if match is None:
        pytest.fail("no Receiver on agentRepliesQueue in the roles module: update this test")
    path.write_text(
        text.replace(match.group(0), match.group(0).replace("agentRepliesQueue", "agentRequestsQueue"))
    )
    assert_fails(
        root,
        "holds no Azure Service Bus Data Receiver on queue 'agent-replies', which agent_reply reads",
        clean=clean,
    )


@needs_bicep
@pytest.mark.parametrize(
    ("scope", "principal", "needle"),
    [
        ("namespace", "appPrincipalId", "to the identity of the Function App 'app' on namespace"),
        (
            "operatorAlertsQueue",
            "appPrincipalId",
            "to the identity of the Function App 'app' on queue 'operator-alerts'",
        ),
        (
            "agentRequestsQueue",
            "agentPrincipalId",
            "to an identity other than the Function App's on queue 'agent-requests'",
        ),
        ("ordersQueue", "agentPrincipalId", "to an identity other than the Function App's on queue 'orders'"),
    ],
)
def test_data_owner_anywhere_else_fails(
    root: Path, clean: Path, scope: str, principal: str, needle: str
) -> None:
    path = app_roles_file(root)
    path.write_text(
        path.read_text() + EXTRA_OWNER.format(scope=scope, principal=principal, role=SB_DATA_OWNER)
    )
    assert_fails(
        root,
        path.name,
        "role assignment 'extraOwner' grants Azure Service Bus Data Owner",
        needle,
        "allowed only to the Function App's identity",
        clean=clean,
    )


# --- Bicep wiring ----------------------------------------------------------------------------


@needs_bicep
def test_a_file_that_does_not_parse_fails(root: Path, clean: Path) -> None:
    """Valid Bicep that pycep-parser 0.7.1 rejects: a condition inside a loop."""
    path = declaring(root, "Microsoft.ServiceBus/namespaces")
    path.write_text(path.read_text() + "\nvar picked = [for x in [1, 2]: if (x > 1) { value: x }]\n")
    assert_fails(root, path.name, "does not parse", clean=clean)


@needs_bicep
def test_a_module_parameter_not_passed_fails(root: Path, clean: Path) -> None:
    path = declaring(root, "Microsoft.ServiceBus/namespaces")
    path.write_text("param mustBePassed string\n" + path.read_text())
    assert_fails(root, "does not pass required parameter 'mustBePassed'", clean=clean)


@needs_bicep
def test_an_unknown_module_parameter_fails(root: Path, clean: Path) -> None:
    main = root / "infra" / "main.bicep"
    edit(main, "  params: {\n", "  params: {\n    notAParameter: 'x'\n")
    assert_fails(root, "main.bicep", "passes 'notAParameter'", clean=clean)


@needs_bicep
def test_main_parameters_json_must_match_main_bicep(root: Path, clean: Path) -> None:
    main = root / "infra" / "main.bicep"
    main.write_text(main.read_text() + "\nparam requiredButUnset string\n")
    edit(
        root / "infra" / "main.parameters.json",
        '"parameters": {',
        '"parameters": {\n    "bogus": {"value": 1},',
    )
    assert_fails(root, "main.parameters.json", "'requiredButUnset' has no value", clean=clean)
    assert_fails(root, "main.parameters.json", "'bogus' is not a parameter", clean=clean)


# --- Service Bus queues ----------------------------------------------------------------------


@needs_bicep
@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        (
            "requiresDuplicateDetection: true",
            "requiresDuplicateDetection: false",
            "requiresDuplicateDetection",
        ),
        (
            "deadLetteringOnMessageExpiration: true",
            "deadLetteringOnMessageExpiration: false",
            "deadLetteringOnMessageExpiration",
        ),
        ("maxDeliveryCount: 5", "maxDeliveryCount: 50", "maxDeliveryCount is 50"),
    ],
)
def test_queue_properties_in_the_bicep(root: Path, clean: Path, old: str, new: str, needle: str) -> None:
    edit(declaring(root, "Microsoft.ServiceBus/namespaces/queues"), old, new)
    assert_fails(root, needle, clean=clean)


@needs_bicep
def test_a_queue_missing_from_the_emulator_config_fails(root: Path, clean: Path) -> None:
    config = root / "harness" / "emulators" / "servicebus-config" / "Config.json"
    delete_line(config, r'"Name": "agent-replies"')
    assert_fails(
        root,
        "queue 'agent-replies'",
        "not declared in harness/emulators/servicebus-config/Config.json",
        clean=clean,
    )
    assert_fails(
        root, "queue 'agent-replies' is not in harness/emulators/servicebus-config/Config.json", clean=clean
    )


@needs_bicep
@pytest.mark.parametrize(
    ("old", "new", "needles"),
    [
        (
            '"LockDuration": "PT1M"',
            '"LockDuration": "PT2M"',
            ('LockDuration is "PT2M" here but lockDuration',),
        ),
        (
            '"RequiresSession": false',
            '"RequiresSession": true',
            ("RequiresSession is true here but requiresSession",),
        ),
    ],
)
def test_emulator_and_bicep_queue_properties_must_agree(
    root: Path, clean: Path, old: str, new: str, needles: tuple[str, ...]
) -> None:
    """A property outside harness/tools/iac/emulator.py EMULATOR_CLAMPED that differs fails, though the
    emulator accepts the value."""
    edit(root / "harness" / "emulators" / "servicebus-config" / "Config.json", old, new)
    assert_fails(
        root, "harness/emulators/servicebus-config/Config.json", *needles, "only those in", clean=clean
    )


def emulator_queue(root: Path, name: str) -> tuple[Path, str]:
    """Config.json and the line that declares this queue."""
    config = root / "harness" / "emulators" / "servicebus-config" / "Config.json"
    line = next((row for row in config.read_text().splitlines() if f'"Name": "{name}"' in row), None)
    if line is None:
        pytest.fail(f"Config.json declares no queue {name!r}: update this test")
    return config, line


@needs_bicep
@pytest.mark.parametrize(
    ("queue", "prop", "old_value", "expected", "range_"),
    [
        # The values Azure uses, put back: the emulator rejects them and the cross-check wants its maximum.
        ("operator-alerts", "DefaultMessageTimeToLive", "P14D", "PT1H", "PT5M..PT1H"),
        ("orders", "DefaultMessageTimeToLive", "P1D", "PT1H", "PT5M..PT1H"),
        ("orders", "DuplicateDetectionHistoryTimeWindow", "PT10M", "PT5M", "PT5S..PT5M"),
    ],
)
def test_azure_values_in_the_emulator_config_fail(
    root: Path, clean: Path, queue: str, prop: str, old_value: str, expected: str, range_: str
) -> None:
    config, line = emulator_queue(root, queue)
    broken = re.sub(rf'"{prop}": "[^"]*"', f'"{prop}": "{old_value}"', line)
    edit(config, line, broken)
    assert_fails(
        root, f"queue '{queue}': {prop} is \"{old_value}\"", f"outside the emulator's {range_}", clean=clean
    )
    assert_fails(root, "emulator fails to start", clean=clean)
    assert_fails(
        root, f'queue \'{queue}\': {prop} is "{old_value}" here but must be "{expected}"', clean=clean
    )


@needs_bicep
def test_a_clamped_property_within_the_emulators_range_must_equal_the_bicep(root: Path, clean: Path) -> None:
    """agent-requests keeps messages PT1H in Azure, which the emulator accepts: no reason to differ."""
    config, line = emulator_queue(root, "agent-requests")
    edit(
        config,
        line,
        line.replace('"DefaultMessageTimeToLive": "PT1H"', '"DefaultMessageTimeToLive": "PT30M"'),
    )
    assert_fails(
        root,
        'queue \'agent-requests\': DefaultMessageTimeToLive is "PT30M" here but must be "PT1H"',
        clean=clean,
    )


@needs_bicep
def test_the_emulator_follows_a_bicep_value_it_accepts(root: Path, clean: Path) -> None:
    """The Bicep's orders TTL lowered into the emulator's range: Config.json must follow it."""
    path = declaring(root, "Microsoft.ServiceBus/namespaces/queues")
    edit(path, "defaultMessageTimeToLive: 'P1D'", "defaultMessageTimeToLive: 'PT30M'")
    assert_fails(
        root, 'queue \'orders\': DefaultMessageTimeToLive is "PT1H" here but must be "PT30M"', clean=clean
    )


@needs_bicep
def test_a_property_the_bicep_states_must_be_in_the_emulator_config(root: Path, clean: Path) -> None:
    config, line = emulator_queue(root, "orders")
    edit(config, line, line.replace('"DuplicateDetectionHistoryTimeWindow": "PT5M", ', ""))
    assert_fails(root, "queue 'orders' does not state DuplicateDetectionHistoryTimeWindow", clean=clean)


@needs_bicep
def test_an_emulator_config_outside_the_schema_fails(root: Path, clean: Path) -> None:
    config = root / "harness" / "emulators" / "servicebus-config" / "Config.json"
    edit(config, '"Name": "sbemulatorns"', '"Name": "orders-ns"')
    edit(config, '"Type": "File"', '"Type": "Syslog"')
    assert_fails(
        root,
        "harness/emulators/servicebus-config/Config.json",
        "'sbemulatorns', which cannot be renamed",
        clean=clean,
    )
    assert_fails(
        root, "harness/emulators/servicebus-config/Config.json", 'Logging.Type is "Syslog"', clean=clean
    )


@needs_bicep
def test_max_deliveries_setting_must_match_the_queue(root: Path, clean: Path) -> None:
    config = root / "harness" / "emulators" / "servicebus-config" / "Config.json"
    edit(
        config,
        '"Name": "orders", "Properties": { "MaxDeliveryCount": 5',
        '"Name": "orders", "Properties": { "MaxDeliveryCount": 7',
    )
    assert_fails(root, "SAS_ORDERS_MAX_DELIVERIES=5", "MaxDeliveryCount 7", clean=clean)


@needs_bicep
def test_a_queue_the_code_names_must_exist(root: Path, clean: Path) -> None:
    """Derived from the code: a new queue setting's default is a queue both configs must declare."""
    settings = root / "agent_worker" / "settings.py"
    edit(
        settings,
        "    concurrency: int",
        '    audit_queue: str = Field("agent-audit", alias="SAS_AGENT_AUDIT_QUEUE")\n    concurrency: int',
    )
    assert_fails(root, "queue 'agent-audit'", "not declared in the Bicep", clean=clean)
    assert_fails(
        root,
        "queue 'agent-audit'",
        "not declared in harness/emulators/servicebus-config/Config.json",
        clean=clean,
    )


# --- settings: derived from function_app.py, Settings and AgentSettings ----------------------


@needs_bicep
@pytest.mark.parametrize("placeholder", code_placeholders())
def test_a_binding_setting_missing_from_the_function_app_fails(
    root: Path, clean: Path, placeholder: str
) -> None:
    delete_line(function_app_file(root), rf"^\s*'?{placeholder}'?\s*:|name: '{placeholder}'")
    assert_fails(root, "Function App", f"does not set {placeholder}", "function_app.py", clean=clean)


@needs_bicep
def test_a_binding_connection_missing_from_the_function_app_fails(root: Path, clean: Path) -> None:
    delete_line(function_app_file(root), r"ServiceBusConnection__fullyQualifiedNamespace")
    assert_fails(root, "does not set ServiceBusConnection__fullyQualifiedNamespace", clean=clean)


@needs_bicep
def test_a_binding_setting_missing_from_the_sample_fails(root: Path, clean: Path) -> None:
    placeholder = code_placeholders()[0]
    delete_line(root / "local.settings.sample.json", rf'"{placeholder}"')
    assert_fails(root, "local.settings.sample.json", f"does not set {placeholder}", clean=clean)


@needs_bicep
def test_a_new_setting_in_the_code_is_required_everywhere(root: Path, clean: Path) -> None:
    settings = root / "settings.py"
    edit(
        settings,
        "    max_in_flight: int",
        '    new_knob: int = Field(1, alias="SAS_NEW_KNOB")\n    max_in_flight: int',
    )
    assert_fails(root, "Function App", "does not set SAS_NEW_KNOB", clean=clean)
    assert_fails(root, "local.settings.sample.json", "does not set SAS_NEW_KNOB", clean=clean)


# --- settings: the sample is what the deployment sets (issue 51) -------------------------------


def set_sample(root: Path, name: str, value: str) -> None:
    sample = root / "local.settings.sample.json"
    document = json.loads(sample.read_text())
    document["Values"][name] = value
    sample.write_text(json.dumps(document, indent=2) + "\n")


@needs_bicep
def test_a_sample_value_that_drifted_from_the_bicep_fails(root: Path, clean: Path) -> None:
    """The bug of issue 51: the Bicep and settings.py moved to 30 s and 150, the sample kept 300 and 20."""
    set_sample(root, "SAS_POSTPONE_LIMIT", "20")
    assert_fails(
        root,
        "local.settings.sample.json",
        'SAS_POSTPONE_LIMIT="20"',
        "Function App",
        'sets "150"',
        clean=clean,
    )


@needs_bicep
def test_an_agent_value_that_drifted_fails_too(root: Path, clean: Path) -> None:
    set_sample(root, "AGENT_BREAKER_FAILURES", "3")
    assert_fails(root, 'AGENT_BREAKER_FAILURES="3"', "agent Container App", 'sets "5"', clean=clean)


@needs_bicep
def test_a_bicep_setting_the_sample_lacks_fails(root: Path, clean: Path) -> None:
    edit(
        function_app_file(root),
        "    SAS_PROFILE: 'azure'",
        "    SAS_PROFILE: 'azure'\n    WEBSITE_TIME_ZONE: 'UTC'",
    )
    assert_fails(
        root, "local.settings.sample.json", "does not set WEBSITE_TIME_ZONE", "functionapp.bicep", clean=clean
    )


@needs_bicep
def test_a_sample_setting_nobody_knows_fails(root: Path, clean: Path) -> None:
    set_sample(root, "SAS_POSTPONE_MAXIMUM_SECONDS", "30")  # a misspelt name: read by nothing
    assert_fails(root, "local.settings.sample.json", "SAS_POSTPONE_MAXIMUM_SECONDS", "neither", clean=clean)


@needs_bicep
def test_a_listed_local_value_that_no_longer_differs_is_stale(root: Path, clean: Path) -> None:
    set_sample(root, "SAS_LEADER_LEASE_SECONDS", "45")
    assert_fails(
        root, "policy.py", "SAMPLE_LOCAL_VALUES lists SAS_LEADER_LEASE_SECONDS", 'sets "45"', clean=clean
    )


@needs_bicep
def test_an_agent_setting_missing_from_the_container_app_fails(root: Path, clean: Path) -> None:
    delete_line(declaring(root, "Microsoft.App/containerApps"), r"'AGENT_CONCURRENCY'|AGENT_CONCURRENCY:")
    assert_fails(root, "agent Container App", "does not set AGENT_CONCURRENCY", clean=clean)


# --- Cosmos DB -------------------------------------------------------------------------------


@needs_bicep
def test_the_partition_key_must_match_the_adapter(root: Path, clean: Path) -> None:
    edit(infra_file(root, "'/OrderID'"), "'/OrderID'", "'/id'")
    assert_fails(root, "partition key", "/OrderID", "cosmos/state_store.py", clean=clean)


@needs_bicep
def test_the_container_must_exist(root: Path, clean: Path) -> None:
    """Every file that names the container renames it: Bicep and app setting agree, the code does not."""
    for path in (root / "infra").rglob("*"):
        if path.is_file() and "'orderState'" in path.read_text():
            edit(path, "'orderState'", "'orders2'", count=99)
    assert_fails(root, "no Cosmos DB container 'orderState'", clean=clean)


# --- submitting apps are isolated (E16): harness/tools/iac/isolation.py, easy_auth.py -------------------

RECEIVER = "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0"  # Azure Service Bus Data Receiver
DATA_OWNER = "090c5cfd-751d-490a-894a-3ce6f1109419"  # Azure Service Bus Data Owner
BLOB_READER = "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1"  # Storage Blob Data Reader (allowed, not for apps)
GRANT = """
resource probeNamespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {{
  name: serviceBusName
}}

resource probeQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {{
  parent: probeNamespace
  name: {queue}
}}

resource grant 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(submitterPrincipalId)) {{
  name: guid(probeNamespace.id, submitterPrincipalId, '{role}')
  {scope}
  properties: {{
    principalId: submitterPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', '{role}')
  }}
}}
"""


def submitter_roles_file(root: Path) -> Path:
    """The module that assigns one submitting app's roles (it takes the app's principal ID)."""
    return infra_file(root, "param submitterPrincipalId ")


def function_app_settings(root: Path) -> tuple[Path, str]:
    """The Bicep file and line that set SAS_SUBMITTERS in the Function App's app settings."""
    path = function_app_file(root)
    line = next(
        (row for row in path.read_text().splitlines() if row.strip().startswith("SAS_SUBMITTERS:")), None
    )
    if line is None:
        pytest.fail("the Function App sets no SAS_SUBMITTERS: update this test to the current infra")
    return path, line


@needs_bicep
@pytest.mark.parametrize(
    ("queue", "role", "scope", "needle"),
    [
        ("'orders'", SENDER, "scope: probeQueue", "lets it send to queue 'orders'"),
        ("'agent-requests'", SENDER, "scope: probeQueue", "lets it send to queue 'agent-requests'"),
        ("'agent-replies'", SENDER, "scope: probeQueue", "lets it send to queue 'agent-replies'"),
        (
            "'agent-replies'",
            RECEIVER,
            "scope: probeQueue",
            "lets it receive from queue 'agent-replies', not its own",
        ),
        (
            "'status-app-b'",
            RECEIVER,
            "scope: probeQueue",
            "lets it receive from queue 'status-app-b', not its own",
        ),
        ("statusQueueName", SENDER, "scope: probeQueue", "lets it send to queue 'status-probe-"),
        ("'orders'", RECEIVER, "scope: probeNamespace", "at namespace scope"),
        ("'orders'", RECEIVER, "", "at the whole resource group (no scope): every queue in it"),
        ("statusQueueName", DATA_OWNER, "scope: probeQueue", "grants it Azure Service Bus Data Owner"),
        (
            "'orders'",
            BLOB_READER,
            "scope: probeNamespace",
            f"grants it role {BLOB_READER} outside Service Bus",
        ),
    ],
)
def test_a_submitting_app_gets_no_role_but_its_own_status_receiver(
    root: Path, clean: Path, queue: str, role: str, scope: str, needle: str
) -> None:
    """Proved for any registered app: the checker deploys main.bicep with probe apps."""
    path = submitter_roles_file(root)
    path.write_text(path.read_text() + GRANT.format(queue=queue, role=role, scope=scope))
    assert_fails(
        root, path.name, "role assignment 'grant' gives the identity of submittingApps[", needle, clean=clean
    )


@needs_bicep
def test_a_submitting_app_must_be_able_to_read_its_status_queue(root: Path, clean: Path) -> None:
    """The receiver turned into one deployed only without an identity: the apps lose it, and a role
    assignment with an empty principal ID is deployed."""
    edit(
        submitter_roles_file(root),
        "= if (!empty(submitterPrincipalId))",
        "= if (empty(submitterPrincipalId))",
    )
    assert_fails(
        root, "submittingApps[0]", "gets no Azure Service Bus Data Receiver on its queue", clean=clean
    )
    assert_fails(root, "is deployed with an empty principalId", clean=clean)


@needs_bicep
def test_every_submitting_app_needs_its_status_queue(root: Path, clean: Path) -> None:
    path = infra_file(root, "name: 'status-${app.name}'", "'Microsoft.ServiceBus/namespaces/queues@")
    edit(path, "name: 'status-${app.name}'", "name: 'state-${app.name}'")
    assert_fails(
        root, "main.bicep", "submittingApps[0] ('probe-1') gets no queue 'status-probe-1'", clean=clean
    )
    assert_fails(
        root,
        "main.parameters.json",
        "submitting app 'app-a' has no queue 'status-app-a' in the Bicep",
        clean=clean,
    )


@needs_bicep
def test_a_submitting_app_needs_its_status_queue_in_the_emulator(root: Path, clean: Path) -> None:
    delete_line(
        root / "harness" / "emulators" / "servicebus-config" / "Config.json", r'"Name": "status-app-a"'
    )
    assert_fails(
        root,
        "submitting app 'app-a' has no queue 'status-app-a' in "
        "harness/emulators/servicebus-config/Config.json",
        clean=clean,
    )


@needs_bicep
def test_the_sample_submitters_name_declared_queues(root: Path, clean: Path) -> None:
    sample = root / "local.settings.sample.json"
    edit(sample, '"SAS_SUBMITTERS": "', '"SAS_SUBMITTERS": "app-c=33333333-3333-3333-3333-333333333333,')
    assert_fails(
        root,
        "queue 'status-app-c'",
        "SAS_SUBMITTERS in local.settings.sample.json",
        "Config.json",
        clean=clean,
    )
    assert_fails(
        root, "queue 'status-app-c'", "SAS_SUBMITTERS in local.settings.sample.json", "the Bicep", clean=clean
    )


@needs_bicep
def test_the_sample_submitters_must_be_well_formed(root: Path, clean: Path) -> None:
    sample = root / "local.settings.sample.json"
    edit(sample, '"SAS_SUBMITTERS": "', '"SAS_SUBMITTERS": "app-a=not-a-guid,')
    assert_fails(root, "local.settings.sample.json", "the client ID of 'app-a' is 'not-a-guid'", clean=clean)
    assert_fails(root, "local.settings.sample.json", "the name 'app-a' is listed twice", clean=clean)


@needs_bicep
def test_sas_submitters_is_built_from_submitting_apps(root: Path, clean: Path) -> None:
    path, line = function_app_settings(root)
    edit(path, line.strip(), "SAS_SUBMITTERS: 'app-a=x'")
    assert_fails(root, "Function App", "SAS_SUBMITTERS is 'app-a=x', not 'probe-1=", clean=clean)


@needs_bicep
def test_the_deployment_never_sets_website_auth_enabled(root: Path, clean: Path) -> None:
    path, line = function_app_settings(root)
    indent = line[: len(line) - len(line.lstrip())]
    edit(path, line, f"{line}\n{indent}WEBSITE_AUTH_ENABLED: 'true'")
    assert_fails(root, "Function App", "sets WEBSITE_AUTH_ENABLED", clean=clean)


@needs_bicep
def test_submitting_apps_in_the_parameters_are_name_client_and_principal(root: Path, clean: Path) -> None:
    path = root / "infra" / "main.parameters.json"
    doc = json.loads(path.read_text())
    apps = doc["parameters"]["submittingApps"]["value"]
    assert len(apps) >= 2, "main.parameters.json lists two apps: update this test"
    del apps[0]["clientId"]
    apps[1]["name"] = "App_B"
    apps[0]["principalId"] = apps[1]["principalId"] = "a0000000-0000-4000-8000-00000000000a"
    path.write_text(json.dumps(doc, indent=2))
    assert_fails(root, "main.parameters.json", "submittingApps[0] has no 'clientId'", clean=clean)
    assert_fails(
        root, "main.parameters.json", 'submittingApps[1]: name "App_B" is not a registered name', clean=clean
    )
    assert_fails(
        root,
        "principalId 'a0000000-0000-4000-8000-00000000000a' is also that of submittingApps[0]",
        clean=clean,
    )


@needs_bicep
@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        (
            "requireAuthentication: true",
            "requireAuthentication: false",
            "requireAuthentication is false, must be true",
        ),
        (
            "unauthenticatedClientAction: 'Return401'",
            "unauthenticatedClientAction: 'AllowAnonymous'",
            'unauthenticatedClientAction is "AllowAnonymous", must be "Return401"',
        ),
        (
            "requireAuthentication: true",
            "requireAuthentication: true\n      excludedPaths: [\n        '/api/orders'\n      ]",
            'excludes ["/api/orders"] from authentication',
        ),
        ("clientId: frontEndClientId", "clientId: 'someone-else'", 'registration.clientId is "someone-else"'),
        ("'api://${frontEndClientId}'", "'api://someone-else'", 'allowedAudiences is ["api://someone-else"]'),
        ("allowedApplications: allowedApplications", "allowedApplications: []", "allowedApplications is []"),
        (
            "= if (!empty(frontEndClientId))",
            "= if (empty(frontEndClientId))",
            "gets no App Service Authentication (Microsoft.Web/sites/config 'authsettingsV2')",
        ),
        ("= if (!empty(frontEndClientId))", "=", "is deployed when frontEndClientId is empty"),
    ],
)
def test_app_service_authentication_whenever_the_front_end_is_registered(
    root: Path, clean: Path, old: str, new: str, needle: str
) -> None:
    edit(infra_file(root, "'authsettingsV2'"), old, new)
    assert_fails(root, needle, clean=clean)


# --- the Python version: pyproject.toml, the Function App's runtime, the agent's image ----------


def target_python() -> str:
    """The minimum of requires-python, read as the checker does."""
    match = re.search(r'^requires-python\s*=\s*">=\s*(\d+\.\d+)', (REPO / "pyproject.toml").read_text(), re.M)
    assert match, "pyproject.toml states requires-python as '>=X.Y': update this test"
    return match.group(1)


def older(version: str) -> str:
    major, minor = version.split(".")
    return f"{major}.{int(minor) - 1}"


@needs_bicep
def test_the_function_app_runtime_must_be_the_target_python(root: Path, clean: Path) -> None:
    target = target_python()
    edit(function_app_file(root), f"version: '{target}'", f"version: '{older(target)}'")
    assert_fails(root, "Function App", f"python {older(target)}", f"targets Python {target}", clean=clean)


@needs_bicep
def test_the_agent_image_must_be_the_target_python(root: Path, clean: Path) -> None:
    target = target_python()
    edit(root / "agent_worker" / "Dockerfile", f"FROM python:{target}", f"FROM python:{older(target)}")
    assert_fails(root, "agent_worker/Dockerfile", f"Python {older(target)}", f"targets {target}", clean=clean)


@needs_bicep
def test_a_new_requires_python_needs_the_deployments_to_follow(root: Path, clean: Path) -> None:
    target = target_python()
    edit(root / "pyproject.toml", f'requires-python = ">={target}"', f'requires-python = ">={older(target)}"')
    assert_fails(root, "Function App", f"targets Python {older(target)}", "requires-python", clean=clean)
    assert_fails(root, "agent_worker/Dockerfile", f"targets {older(target)}", clean=clean)


# --- checkov (slow: ~5 s a run) --------------------------------------------------------------


@needs_checkov
def test_checkov_parse_error_fails(root: Path) -> None:
    """Valid Bicep that checkov's pycep-parser 0.5.1 rejects: a lambda."""
    path = declaring(root, "Microsoft.ServiceBus/namespaces")
    path.write_text(path.read_text() + "\nvar doubled = map([1, 2], i => i * 2)\n")
    code, lines = run(CHECKOV_PYTHON, "harness.tools.iac.checkov_check", root)
    assert code == 1
    assert any(path.name in line and "checkov cannot parse it" in line for line in lines), lines


@needs_checkov
def test_checkov_failed_check_not_skipped_fails_and_skips_need_reasons(root: Path) -> None:
    skips = root / "harness" / "tools" / "iac" / "checkov-skips.txt"
    lines = skips.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("CKV"))
    dropped = lines[first].split(":")[0]
    check_id = dropped.split()[0]
    lines[first] = "# removed"
    second = next(i for i, line in enumerate(lines) if line.startswith("CKV"))
    lines[second] = lines[second].split(":")[0] + ":"
    skips.write_text("\n".join(lines) + "\n")
    code, out = run(CHECKOV_PYTHON, "harness.tools.iac.checkov_check", root)
    assert code == 1
    assert any(check_id in line and "fix it, or add" in line for line in out), out
    assert any("has no reason" in line for line in out), out


# --- the front end's token validation (harness/tools/iac/app_roles.py) --------------------------------

APP_ROLES = "infra/scripts/app_roles.py"


@needs_bicep
def test_the_app_role_must_be_the_one_the_front_end_requires(root: Path, clean: Path) -> None:
    edit(root / APP_ROLES, '"value": "Orders.Submit"', '"value": "Orders.Write"')
    assert_fails(root, APP_ROLES, "'Orders.Write', the front end requires 'Orders.Submit'", clean=clean)


@needs_bicep
def test_the_app_role_must_be_defined(root: Path, clean: Path) -> None:
    edit(root / APP_ROLES, "APP_ROLE: dict[str, Any] = {", "ROLE: dict[str, Any] = {")
    assert_fails(root, APP_ROLES, "defines no literal APP_ROLE", clean=clean)


@needs_bicep
def test_the_app_role_is_for_applications_only(root: Path, clean: Path) -> None:
    edit(
        root / APP_ROLES,
        '"allowedMemberTypes": ["Application"]',
        '"allowedMemberTypes": ["User", "Application"]',
    )
    assert_fails(root, APP_ROLES, "only applications may hold it", clean=clean)


@needs_bicep
def test_the_hooks_must_run_the_app_role_step(root: Path, clean: Path) -> None:
    edit(root / "infra/scripts/postprovision.sh", '"$python" "$(dirname "$0")/app_roles.py"\n', "")
    assert_fails(root, "postprovision.sh", "does not run", clean=clean)


@needs_bicep
def test_every_submitter_is_assigned_the_role(root: Path, clean: Path) -> None:
    """The assignments follow main.bicep's SAS_SUBMITTERS output: without it, or with another
    value than the Function App's registry, some app is missing its assignment."""
    main = root / "infra/main.bicep"
    edit(
        main,
        "output SAS_SUBMITTERS string = functionApp.outputs.submitters",
        "output SAS_SUBMITTERS string = ''",
    )
    assert_fails(root, "main.bicep", "output SAS_SUBMITTERS is", clean=clean)
    edit(main, "output SAS_SUBMITTERS string = ''\n", "")
    assert_fails(root, "main.bicep", "has no output SAS_SUBMITTERS", clean=clean)


@needs_bicep
def test_the_script_must_assign_the_role(root: Path, clean: Path) -> None:
    edit(root / APP_ROLES, "appRoleAssignedTo", "appRoles", count=3)
    assert_fails(root, APP_ROLES, "assigns no app role", clean=clean)


@needs_bicep
@pytest.mark.parametrize("setting", ["SAS_AUTH_TENANT_ID", "SAS_AUTH_AUDIENCE", "SAS_AUTH_AUTHORITY"])
def test_the_validators_settings_are_required(root: Path, clean: Path, setting: str) -> None:
    delete_line(root / "infra/modules/functionapp.bicep", rf"^\s+{setting}:")
    assert_fails(root, "Function App", f"does not set {setting}", clean=clean)


@needs_bicep
def test_the_validator_trusts_this_tenant_and_this_api_only(root: Path, clean: Path) -> None:
    path = root / "infra/modules/functionapp.bicep"
    edit(path, "SAS_AUTH_TENANT_ID: tenant().tenantId", "SAS_AUTH_TENANT_ID: 'common'")
    edit(path, "SAS_AUTH_AUDIENCE: frontEndClientId", "SAS_AUTH_AUDIENCE: 'api://${frontEndClientId}'")
    assert_fails(root, "Function App", "sets SAS_AUTH_TENANT_ID to 'common'", clean=clean)
    assert_fails(root, "Function App", "sets SAS_AUTH_AUDIENCE to 'api://${frontEndClientId}'", clean=clean)
