"""The stores of the emulators and azure profiles: Cosmos DB, SQL through pyodbc, Table Storage.

Azure: identity-based — an endpoint and the Function App's user-assigned managed identity
(``AZURE_CLIENT_ID``), no keys. Emulators: the connection strings the local servers publish.
"""

from datetime import timedelta
from typing import Any

from adapters.blob_lease import BlobLeaderLease
from adapters.cosmos_state_store import CosmosStateStore
from adapters.sql_orders import SQLITE_ODBC, SqlDialect, SqlOrdersRepository, pyodbc_orders_repository
from adapters.table_compensation_log import TABLE, TableCompensationLog
from services.settings import Settings

SQLSERVER = SqlDialect("sqlserver", datetimes_as_text=False)
POSTGRESQL = SqlDialect("postgresql", datetimes_as_text=False)
DIALECTS = {"sqlite-odbc": SQLITE_ODBC, "sqlserver": SQLSERVER, "postgresql": POSTGRESQL}


class MissingSetting(ValueError):
    pass


def _credential(settings: Settings) -> Any:
    from azure.identity import DefaultAzureCredential  # noqa: PLC0415 - azure profile only

    return DefaultAzureCredential(managed_identity_client_id=settings.managed_identity_client_id)


def cosmos_state_store(settings: Settings) -> CosmosStateStore:
    from azure.cosmos import CosmosClient  # noqa: PLC0415

    if settings.cosmos_connection:
        # The local emulator: a self-signed certificate on loopback.
        client = CosmosClient.from_connection_string(settings.cosmos_connection, connection_verify=False)
        emulator = True
    elif settings.cosmos_endpoint:
        client = CosmosClient(settings.cosmos_endpoint, credential=_credential(settings))
        emulator = False
    else:
        raise MissingSetting(
            "set CosmosDBConnection__accountEndpoint (azure) or CosmosDBConnection (emulator)"
        )
    container = client.get_database_client(settings.cosmos_database).get_container_client(
        settings.cosmos_container
    )
    return CosmosStateStore(container, emulator=emulator)


def sql_orders_repository(settings: Settings) -> SqlOrdersRepository:
    if not settings.sql_connection:
        raise MissingSetting("set SqlConnection to an ODBC connection string")
    return pyodbc_orders_repository(settings.sql_connection, DIALECTS[settings.sql_dialect])


def table_compensation_log(settings: Settings) -> TableCompensationLog:
    from azure.data.tables import TableClient  # noqa: PLC0415

    if settings.tables_connection:
        table = TableClient.from_connection_string(settings.tables_connection, TABLE)
    elif settings.tables_endpoint:
        table = TableClient(settings.tables_endpoint, TABLE, credential=_credential(settings))
    else:
        raise MissingSetting(
            "set CompensationLogConnection__tableServiceUri (azure) or CompensationLogConnection (emulator)"
        )
    return TableCompensationLog(table)


LEASE_CONTAINER = "leases"


def blob_leader_lease(settings: Settings, ttl: timedelta) -> BlobLeaderLease:
    from azure.storage.blob import BlobServiceClient  # noqa: PLC0415

    if settings.lease_storage_connection:
        service = BlobServiceClient.from_connection_string(settings.lease_storage_connection)
    elif settings.lease_storage_endpoint:
        service = BlobServiceClient(settings.lease_storage_endpoint, credential=_credential(settings))
    else:
        raise MissingSetting("set LeaseStorageConnection__blobServiceUri (azure) or LeaseStorageConnection")
    container = service.get_container_client(LEASE_CONTAINER)
    if not container.exists():
        container.create_container()
    return BlobLeaderLease(container.get_blob_client("supervisor"), ttl)
