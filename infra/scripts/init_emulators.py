"""Create what infra/ creates in Azure, in the local emulators of docker-compose.yml: the Cosmos DB
database and containers (state records and recovery index) and the compensation log table.
The SQL Server schema is created by the compose service ``sql-init``; the leader-lease blob
container is created by the app itself.

Run from the repository root after ``docker compose up -d``, with the app's dependencies
installed: ``python infra/scripts/init_emulators.py`` (reads local.settings.json, else
local.settings.sample.json). Safe to run again.
"""

import json
import sys
import time
from pathlib import Path

# A set-up script, like the adapters allowed to use the Azure SDKs.
from azure.core.exceptions import ServiceRequestError  # noqa: TID251
from azure.cosmos import CosmosClient, PartitionKey  # noqa: TID251
from azure.data.tables import TableServiceClient  # noqa: TID251

ROOT = Path(__file__).resolve().parents[2]
# The same composite indexes as infra/modules/cosmos.bicep (the vNext emulator may ignore them).
COMPOSITE_INDEXES = [
    [{"path": "/ProcessState", "order": "ascending"}, {"path": f"/{field}", "order": "ascending"}]
    for field in ("CompleteBy", "CreatedAt", "OrderID")
]


def load_values() -> dict[str, str]:
    for name in ("local.settings.json", "local.settings.sample.json"):
        path = ROOT / name
        if path.exists():
            values: dict[str, str] = json.loads(path.read_text())["Values"]
            print(f"init: settings from {name}")
            return values
    sys.exit("init: no local.settings.json or local.settings.sample.json at the repository root")


def create_cosmos(values: dict[str, str]) -> None:
    client = CosmosClient.from_connection_string(values["CosmosDBConnection"], connection_verify=False)
    for attempt in range(30):  # the emulator takes a while to accept requests after it starts
        try:
            database = client.create_database_if_not_exists(values.get("SAS_COSMOS_DATABASE", "sas"))
            break
        except ServiceRequestError:
            if attempt == 29:
                raise
            time.sleep(5)
    state = values.get("SAS_COSMOS_CONTAINER", "orderState")
    database.create_container_if_not_exists(
        state,
        PartitionKey("/OrderID"),
        indexing_policy={
            "indexingMode": "consistent",
            "includedPaths": [{"path": "/*"}],
            "excludedPaths": [{"path": '/"_etag"/?'}],
            "compositeIndexes": COMPOSITE_INDEXES,
        },
    )
    recovery = values.get("SAS_COSMOS_RECOVERY_CONTAINER", "recoveryIndex")
    database.create_container_if_not_exists(recovery, PartitionKey("/Bucket"))
    print(f"init: Cosmos DB containers {state} (/OrderID) and {recovery} (/Bucket)")


def create_table(values: dict[str, str]) -> None:
    service = TableServiceClient.from_connection_string(values["CompensationLogConnection"])
    service.create_table_if_not_exists("compensationlog")
    print("init: table compensationlog")


def main() -> None:
    values = load_values()
    create_cosmos(values)
    create_table(values)


if __name__ == "__main__":
    main()
