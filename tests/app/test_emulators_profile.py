"""The app on the emulators profile: state in the Cosmos DB API server, orders in SQL through
pyodbc (the SQLite ODBC driver), the compensation log in Azurite's Table Storage — the Azure
adapters inside the real workflow, on devhost. Messaging is still the local Service Bus."""

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.cosmos import CosmosClient, PartitionKey

from domain.states import ProcessState

# The Cosmos DB server, Azurite and PostgreSQL.
from tests.support.app import App, emulators_settings, order_body, start_app, submission
from tests.support.emulators import empty_compensation_log
from tests.support.scripted_agent import Answer

# The Cosmos DB server, Azurite and PostgreSQL.
pytestmark = pytest.mark.emulators


@pytest.fixture
def emulated(
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cosmos_client: CosmosClient,
    cosmos_connection: str,
    azurite_tables: str,
) -> Iterator[App]:
    # What Bicep creates in Azure: the container and the table. The orders schema is the app's
    # to create on a local engine (adapters/sql/schema.py): the database starts empty.
    database = f"sas{uuid.uuid4().hex[:8]}"
    cosmos_client.create_database(database).create_container("orderState", PartitionKey("/OrderID"))
    orders = f"Driver={{SQLite3}};Database={tmp_path / 'orders-odbc.db'}"
    empty_compensation_log(azurite_tables)
    app = start_app(
        loop,
        tmp_path,
        monkeypatch,
        settings=emulators_settings(
            cosmos=cosmos_connection,
            sql=orders,
            dialect="sqlite-odbc",
            tables=azurite_tables,
            SAS_COSMOS_DATABASE=database,
        ),
    )
    yield app
    app.stop()


def test_orders_are_processed_and_compensated_on_the_azure_adapters(emulated: App) -> None:
    emulated.agent.script = lambda r, n: (
        Answer("permanent") if r.OrderID == "o-2" and r.Step == "ChargePayment" else Answer("ok")
    )
    emulated.submit(submission("o-1"))
    emulated.submit(submission("o-2"))
    emulated.run_until_terminal("o-1", "o-2")
    assert emulated.record("o-1").ProcessState is ProcessState.PROCESSED
    assert emulated.record("o-2").ProcessState is ProcessState.COMPENSATED
    # The refused ChargePayment is undone too (its request went out), newest first.
    entries = emulated.compensation_log.entries("o-2")
    assert [(e.Step, e.Outcome) for e in entries] == [
        ("ChargePayment", "Compensated"),
        ("ReserveInventory", "Compensated"),
    ]
    assert emulated.ports().orders.get("o-1").Status == "Confirmed"  # type: ignore[union-attr]
    statuses = emulated.statuses("status-app-a")
    assert [s["Status"] for s in statuses if s["OrderID"] == "o-1"] == ["received", "completed"]
    assert [s["Status"] for s in statuses if s["OrderID"] == "o-2"] == ["received", "compensated"]


def test_the_front_end_isolates_apps_on_the_azure_adapters_too(emulated: App) -> None:
    """The same rule as on the embedded profile, with the record read from Cosmos DB."""
    body = order_body("web-1")
    assert emulated.http("POST", "/api/orders", body, app="app-a")[0] == 202
    emulated.run_until_terminal("web-1")
    assert emulated.http("GET", "/api/orders/web-1", app="app-a")[0] == 200
    assert emulated.http("GET", "/api/orders/web-1", app="app-b")[0] == 404
    assert emulated.http("POST", "/api/orders", body, app="app-b")[0] == 409
    assert emulated.http("POST", "/api/orders", body, app=None)[0] == 401
    assert emulated.http("POST", "/api/orders", body, app="app-a")[0] == 202  # a repeat: idempotent
