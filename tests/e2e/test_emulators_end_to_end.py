"""The whole app on the emulators profile, as real processes: devhost running function_app.py,
two agent worker processes and the simulator, against the Cosmos DB API server, the AMQP test
broker (through azure-servicebus), PostgreSQL over ODBC and Azurite (Tables, Blob leases).

Nothing here is the local bus or SQLite: every message and every record goes through the
adapters the azure profile deploys.
"""

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import CosmosClient, PartitionKey

from adapters.servicebus.azure import ServiceBusMessaging
from adapters.sql.orders import POSTGRESQL, pyodbc_orders_repository
from adapters.sql.schema import POSTGRESQL_SCHEMA
from domain.states import ProcessState
from harness.demo.judge import EXPECTED_STATUS
from harness.demo.stack import Stack, wait_for
from tests.support.app import submission
from tests.support.emulators import AZURITE_KEY, empty_compensation_log, new_postgres_database

# devhost start, agents and the simulator as child processes, on the emulators.
pytestmark = [pytest.mark.processes, pytest.mark.emulators]

APPS = ("app-a", "app-b")
SKUS = {3: "BACKORDER-9", 7: "BLOCKED-9"}
EXPECTED = {3: ProcessState.COMPENSATED, 7: ProcessState.ERROR}


@pytest.fixture
def emulators_settings(
    cosmos_client: CosmosClient,
    cosmos_connection: str,
    azurite_tables: str,
    azurite_blob_endpoint: str,
    postgres_odbc: str,
    servicebus_broker: Any,
) -> dict[str, str]:
    # What Bicep and the post-provision script create in Azure: container, schema and table.
    database = f"sas{uuid.uuid4().hex[:8]}"
    cosmos_client.create_database(database).create_container("orderState", PartitionKey("/OrderID"))
    orders_database = new_postgres_database(postgres_odbc)
    pyodbc_orders_repository(orders_database, POSTGRESQL, POSTGRESQL_SCHEMA)
    empty_compensation_log(azurite_tables)
    return {
        "SAS_PROFILE": "emulators",
        "ServiceBusConnection": servicebus_broker.connection_string,
        "CosmosDBConnection": cosmos_connection,
        "SAS_COSMOS_DATABASE": database,
        "SqlConnection": orders_database,
        "SAS_SQL_DIALECT": "postgresql",
        "CompensationLogConnection": azurite_tables,
        "LeaseStorageConnection": (
            f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={azurite_blob_endpoint};"
        ),
        "SAS_MAX_IN_FLIGHT": "40",
    }


@pytest.mark.slow
def test_100_orders_from_two_apps_on_the_emulators_profile(
    tmp_path: Path, emulators_settings: dict[str, str]
) -> None:
    # Transient faults only, so every outcome is known in advance: BACKORDER-* orders fail their
    # last step and are compensated, BLOCKED-* fail the first (nothing to undo), the rest succeed.
    profile = {"transient_rate": 0.1, "latency_ms": [0, 10], "seed": 11}
    # No agent at first: the first orders' requests go unanswered, their attempts expire, and
    # only the Supervisor can bring them back (R7).
    stack = Stack(tmp_path, agents=0, profile=profile, settings=emulators_settings).start()
    try:
        silent = [f"s-{n:02d}" for n in range(6)]
        stack.submit([submission(i, app=APPS[n % 2]) for n, i in enumerate(silent)])

        def recovered_by_supervisor() -> bool:
            records = stack.records(silent)
            return all(r is not None and r.FailureCount >= 1 for r in records.values())

        wait_for(recovered_by_supervisor, "the Supervisor to recover the unanswered orders", 90)
        for n in range(2):
            stack.start_agent(f"agent-{n}")
        ids = [f"o-{n:03d}" for n in range(94)]
        stack.submit(
            [submission(i, app=APPS[n % 2], sku=SKUS.get(n % 10, "SKU-1")) for n, i in enumerate(ids)]
        )
        # A hostile message. As on Azure, the app cannot settle a message the host's link holds
        # (that needs the SDK-type binding): its reason goes out in an alert, the function fails, and
        # the broker dead-letters it after MaxDeliveryCount (docs/operating.md, known limitations).
        stack.ports().sender.send("orders", "{not json", message_id="garbage-1")
        everyone = silent + ids
        records = stack.wait_terminal(everyone, timeout=300)
        messaging = stack.ports().settlement  # the adapter itself: the sender is wrapped in the retry policy
        assert isinstance(messaging, ServiceBusMessaging)
        wait_for(lambda: bool(messaging.peek("orders/$deadletterqueue", 10)), "garbage-1's dead letter", 120)
        statuses = {app: [json.loads(m.body) for m in messaging.peek(f"status-{app}", 2000)] for app in APPS}
        in_sql = {i for i in everyone if stack.ports().orders.get(i) is not None}
        dead = [(m.message_id, m.dead_letter_reason) for m in messaging.peek("orders/$deadletterqueue", 10)]
        alerts = [json.loads(m.body) for m in messaging.peek("operator-alerts", 100)]
    finally:
        codes = stack.stop()
    assert set(records) == set(everyone)
    expected = {i: EXPECTED.get(n % 10, ProcessState.PROCESSED) for n, i in enumerate(ids)}
    expected |= {i: ProcessState.PROCESSED for i in silent}
    assert {i: r.ProcessState for i, r in records.items()} == expected
    assert dead == [("garbage-1", "MaxDeliveryCountExceeded")]
    [alert] = [a for a in alerts if "garbage-1" in a["Reason"]]  # once, though delivered five times
    assert alert["Event"] == "SubmissionRejected" and alert["Reason"].startswith("InvalidSchema")
    assert in_sql == set(everyone)  # written through pyodbc to PostgreSQL by the submission function
    assert all(records[i].FailureCount >= 1 for i in silent)
    # Each submitting app hears about its own orders, on its own queue only (E16).
    app_of = {i: APPS[n % 2] for batch in (silent, ids) for n, i in enumerate(batch)}
    for order_id, app in app_of.items():
        other = APPS[1 - APPS.index(app)]
        mine = [s["Status"] for s in statuses[app] if s["OrderID"] == order_id]
        assert mine and mine[-1] == EXPECTED_STATUS[records[order_id].ProcessState], (order_id, mine)
        assert not [s for s in statuses[other] if s["OrderID"] == order_id], order_id
    assert codes == {"simulator": 0, "devhost": 0, "agent-0": 0, "agent-1": 0}
