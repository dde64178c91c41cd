"""The emulators and azure profiles: Cosmos DB, SQL through pyodbc, Table Storage, Blob, Service Bus.

Azure: identity-based — an endpoint and the Function App's user-assigned managed identity
(``AZURE_CLIENT_ID``), no keys. Emulators: the connection strings the local servers publish.
"""

import re
import struct
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from azure.cosmos import ContainerProxy

from adapters.cosmos.recovery_index import CosmosRecoveryIndex
from adapters.cosmos.state_store import CosmosStateStore
from adapters.profiles import StoreBuilders
from adapters.servicebus.azure import ServiceBusMessaging
from adapters.servicebus.clients import servicebus_client
from adapters.sql.orders import (
    POSTGRESQL,
    SQLITE_ODBC,
    SQLSERVER,
    SqlDialect,
    SqlOrdersRepository,
    pyodbc_orders_repository,
)
from adapters.sql.schema import LOCAL_DIALECTS, check_schema, ensure_schema
from adapters.storage.compensation_log import TABLE, TableCompensationLog
from adapters.storage.lease import BlobLeaderLease
from domain.ports import QueueDepth
from settings import Settings, SettingsError

DIALECTS: dict[str, SqlDialect] = {
    "sqlite-odbc": SQLITE_ODBC,
    "sqlserver": SQLSERVER,
    "postgresql": POSTGRESQL,
}


class MissingSetting(SettingsError):
    """A setting the chosen profile needs is not set."""


def sdk_retries(settings: Settings) -> dict[str, Any]:
    """azure-core's own retries for the Table, Blob and Service Bus clients, bounded to fit the
    app's policy (adapters/resilience.py): by default they try 10 times (3 for Service Bus) with
    waits of up to 120 s, long enough to outlive a message lock; here a couple of quick tries,
    and the app's budget covers the rest. Each try is bounded too (HTTP clients only)."""
    return {"retry_total": 2, "retry_backoff_max": settings.retry_max_wait_seconds}


def _http_timeouts(settings: Settings) -> dict[str, Any]:
    return {
        "connection_timeout": settings.connect_timeout_seconds,
        "read_timeout": settings.call_timeout_seconds,
    }


def _credential(settings: Settings) -> Any:
    from azure.identity import DefaultAzureCredential  # noqa: PLC0415 - azure profile only

    return DefaultAzureCredential(managed_identity_client_id=settings.managed_identity_client_id)


def pooled_transport() -> Any:
    """An HTTP transport whose connections every calling thread can reuse.

    azure-core's default keeps 10 connections per host, fewer than the threads that call Cosmos
    here (the Functions thread pool, devhost's loops, a Supervisor's pages); each connection
    beyond is closed after one request, and a new one costs a TLS handshake and loading the CA
    store (about 90 ms with OpenSSL 3.0 on a two-core CI machine). Retries stay off, as
    azure-core sets them: the SDK's own policy retries.
    """
    import requests  # noqa: PLC0415
    from azure.core.pipeline.transport import RequestsTransport  # noqa: PLC0415
    from urllib3.util.retry import Retry  # noqa: PLC0415

    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(
        pool_maxsize=64, max_retries=Retry(total=False, redirect=False, raise_on_status=False)
    )
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return RequestsTransport(session=session, session_owner=False)


def cosmos_container(
    settings: Settings, container: str, **client_options: Any
) -> tuple[ContainerProxy, bool]:
    """A container of the account, and whether the account is a local emulator.

    Throttling (429) is retried by the SDK itself, honouring the service's
    ``x-ms-retry-after-ms``, but only ``SAS_COSMOS_THROTTLE_RETRIES`` times and for at most
    ``SAS_COSMOS_THROTTLE_MAX_WAIT_SECONDS`` in all (plus the last wait the service asked for; the
    SDK starts no new wait past it) — less than a step's window, so a throttled
    write fails inside the attempt (and the attempt is retried by the Scheduler's policy, C2)
    rather than outliving its ``CompleteBy``.
    """
    from azure.cosmos import CosmosClient  # noqa: PLC0415

    throttling = {
        "transport": pooled_transport(),
        "retry_throttle_total": settings.cosmos_throttle_retries,
        "retry_throttle_backoff_max": settings.cosmos_throttle_max_wait_seconds,
        # A stalled server: the defaults (5 s to connect, 65 s to answer, up to 10 tries) would
        # hold a call for minutes. Each try is one request, bounded by the two timeouts; the app's
        # policy (adapters/resilience.py) makes the further tries, and starts none after
        # SAS_RETRY_BUDGET_SECONDS, so a caller hears within the budget plus one timeout. An SDK
        # retry inside a try would double it: a read that timed out on a pooled connection is
        # retried on a new one, held in its TLS handshake (harness/standins/FAULTS.md, issue 37).
        "connection_timeout": settings.connect_timeout_seconds,
        "read_timeout": settings.call_timeout_seconds,
        "retry_connect": 0,
        "retry_read": 0,
        "retry_backoff_max": settings.retry_max_wait_seconds,
        **client_options,
    }
    if settings.cosmos_connection:
        # The local emulator: a self-signed certificate on loopback, so no warning per request.
        import urllib3  # noqa: PLC0415

        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        client = CosmosClient.from_connection_string(
            settings.cosmos_connection, connection_verify=False, **throttling
        )
        emulator = True
    elif settings.cosmos_endpoint:
        client = CosmosClient(settings.cosmos_endpoint, credential=_credential(settings), **throttling)
        emulator = False
    else:
        raise MissingSetting(
            "set CosmosDBConnection__accountEndpoint (azure) or CosmosDBConnection (emulator)"
        )
    return client.get_database_client(settings.cosmos_database).get_container_client(container), emulator


def cosmos_state_store(settings: Settings, **client_options: Any) -> CosmosStateStore:
    container, emulator = cosmos_container(settings, settings.cosmos_container, **client_options)
    return CosmosStateStore(container, emulator=emulator)


def cosmos_recovery_index(settings: Settings) -> CosmosRecoveryIndex:
    """The recovery index container (E14), beside the state container in the same account."""
    container, emulator = cosmos_container(settings, settings.cosmos_recovery_container)
    return CosmosRecoveryIndex(
        container, timedelta(minutes=settings.recovery_bucket_minutes), emulator=emulator
    )


# One ``key=value`` pair: a value in braces may hold ``;`` (``}}`` is a literal ``}`` inside).
_ODBC_ATTRIBUTE = re.compile(r"\s*([^=;]+?)\s*=\s*(\{(?:[^}]|\}\})*\}|[^;]*?)\s*(?:;|$)")


def odbc_attributes(connection_string: str) -> dict[str, str]:
    """The pairs of an ODBC connection string, keys lower-cased (ODBC keys ignore case)."""
    attributes: dict[str, str] = {}
    text = connection_string.strip()
    position = 0
    while position < len(text):
        match = _ODBC_ATTRIBUTE.match(text, position)
        if match is None:
            # The position only: the string may hold a secret that must not reach a log.
            raise SettingsError(f"SqlConnection is not an ODBC connection string (at character {position})")
        attributes[match[1].lower()] = match[2]
        position = match.end()
    return attributes


ODBC_DRIVER_18 = "{ODBC Driver 18 for SQL Server}"
_PASSWORD_KEYS = ("pwd", "password")
_UNENCRYPTED = ("no", "false", "optional")


def azure_sql_connection_string(settings: Settings) -> str:
    """``SqlConnection`` for the sqlserver dialect, completed for Azure SQL with Entra ID only.

    In Azure the setting names just the server and database
    (``Server=tcp:<server>.database.windows.net,1433;Database=<db>``) and ``AZURE_CLIENT_ID`` the
    Function App's user-assigned managed identity. What is missing is added: ODBC Driver 18,
    ``Encrypt=yes``, and ``Authentication=ActiveDirectoryMsi;UID=<client id>`` (without UID the
    driver would try a system-assigned identity the app does not have). Attributes already in
    the setting are kept. The azure profile refuses a password or an unencrypted connection: no
    keys anywhere, and a secret in app settings is exactly what identity-based access avoids. The
    emulators profile passes SQL logins through (a local SQL Server container has no Entra ID).
    """
    assert settings.sql_connection is not None
    attributes = odbc_attributes(settings.sql_connection)
    azure = settings.profile == "azure"
    if azure and any(key in attributes for key in _PASSWORD_KEYS):
        raise SettingsError(
            "SqlConnection must not hold a password: Azure SQL is Entra-only here, reached with the "
            "managed identity in AZURE_CLIENT_ID (remove Pwd/Password)"
        )
    if azure and attributes.get("encrypt", "yes").lower() in _UNENCRYPTED:
        raise SettingsError("SqlConnection must not turn encryption off for Azure SQL (Encrypt=yes)")
    additions: list[str] = []
    if "driver" not in attributes:
        additions.append(f"Driver={ODBC_DRIVER_18}")
    if "encrypt" not in attributes:
        additions.append("Encrypt=yes")
    if not any(key in attributes for key in ("authentication", "trusted_connection", *_PASSWORD_KEYS)):
        additions.append("Authentication=ActiveDirectoryMsi")
        attributes["authentication"] = "ActiveDirectoryMsi"
    if attributes.get("authentication", "").lower() == "activedirectorymsi" and "uid" not in attributes:
        if not settings.managed_identity_client_id:
            raise MissingSetting(
                "set AZURE_CLIENT_ID to the client ID of the Function App's user-assigned managed "
                "identity: Azure SQL is reached with Authentication=ActiveDirectoryMsi"
            )
        additions.append(f"UID={settings.managed_identity_client_id}")
    return ";".join([settings.sql_connection.strip().rstrip(";"), *additions])


def _sql_repository(settings: Settings) -> SqlOrdersRepository:
    if not settings.sql_connection:
        raise MissingSetting("set SqlConnection to an ODBC connection string")
    connection_string = settings.sql_connection
    if settings.sql_dialect == "sqlserver":
        connection_string = azure_sql_connection_string(settings)
    return pyodbc_orders_repository(
        connection_string,
        DIALECTS[settings.sql_dialect],
        login_timeout=settings.connect_timeout_seconds,
        query_timeout=settings.call_timeout_seconds,
    )


# msodbcsql.h SQL_COPT_SS_ACCESS_TOKEN: an Entra access token in place of a login, for a principal
# the driver's Authentication= modes do not cover (the deployer's az login).
SQL_COPT_SS_ACCESS_TOKEN = 1256
AZURE_SQL_SCOPE = "https://database.windows.net/.default"


def sql_access_token(credential: Any) -> Callable[[], dict[int, bytes]]:
    """The connection attribute that signs in with ``credential``'s token for Azure SQL: the
    token as UTF-16-LE bytes after their length (a little-endian 32-bit count), as the driver
    reads it. Asked for on each new connection, so a long ``ops watch`` never sends an expired one."""

    def attributes() -> dict[int, bytes]:
        token = str(credential.get_token(AZURE_SQL_SCOPE).token).encode("utf-16-le")
        return {SQL_COPT_SS_ACCESS_TOKEN: struct.pack("<I", len(token)) + token}

    return attributes


def entra_sql_connection_string(server: str, database: str) -> str:
    """Azure SQL over ODBC Driver 18, encrypted, with no login in the string: the access token
    (``sql_access_token``) is the login, and the driver refuses one given both ways."""
    return f"Driver={ODBC_DRIVER_18};Server=tcp:{server},1433;Database={database};Encrypt=yes"


def token_sql_orders_repository(
    settings: Settings, connection_string: str, credential: Any
) -> SqlOrdersRepository:
    """The orders database as whoever ``credential`` signs in: ``ops --azd`` as the deployer,
    the SQL server's Entra administrator (infra/modules/sql.bicep). Nothing connects until the
    first read."""
    return pyodbc_orders_repository(
        connection_string,
        SQLSERVER,
        login_timeout=settings.connect_timeout_seconds,
        query_timeout=settings.call_timeout_seconds,
        attrs_before=sql_access_token(credential),
    )


def sql_orders_repository(settings: Settings) -> SqlOrdersRepository:
    repository = _sql_repository(settings)
    # Before the first order, not in the middle of one: a local engine's schema is the app's to
    # make; SQL Server's is the post-provision step's, and without it the database is not ready.
    with repository.pool.connection() as connection:
        if settings.sql_dialect in LOCAL_DIALECTS:
            ensure_schema(connection, settings.sql_dialect)
        else:
            check_schema(connection, settings.sql_dialect)
    return repository


def create_orders_schema(settings: Settings) -> list[str]:
    """``ops schema``: create or migrate the schema on any engine, SQL Server included."""
    repository = _sql_repository(settings)
    try:
        with repository.pool.connection() as connection:
            return ensure_schema(connection, settings.sql_dialect)
    finally:
        repository.close()


def table_compensation_log(settings: Settings) -> TableCompensationLog:
    from azure.data.tables import TableClient  # noqa: PLC0415

    if settings.tables_connection:
        table = TableClient.from_connection_string(
            settings.tables_connection, TABLE, **sdk_retries(settings), **_http_timeouts(settings)
        )
    elif settings.tables_endpoint:
        table = TableClient(
            settings.tables_endpoint,
            TABLE,
            credential=_credential(settings),
            **sdk_retries(settings),
            **_http_timeouts(settings),
        )
    else:
        raise MissingSetting(
            "set CompensationLogConnection__tableServiceUri (azure) or CompensationLogConnection (emulator)"
        )
    return TableCompensationLog(table)


LEASE_CONTAINER = "leases"


def blob_leader_lease(settings: Settings, ttl: timedelta) -> BlobLeaderLease:
    from azure.storage.blob import BlobServiceClient  # noqa: PLC0415

    if settings.lease_storage_connection:
        service = BlobServiceClient.from_connection_string(
            settings.lease_storage_connection, **sdk_retries(settings), **_http_timeouts(settings)
        )
    elif settings.lease_storage_endpoint:
        service = BlobServiceClient(
            settings.lease_storage_endpoint,
            credential=_credential(settings),
            **sdk_retries(settings),
            **_http_timeouts(settings),
        )
    else:
        raise MissingSetting("set LeaseStorageConnection__blobServiceUri (azure) or LeaseStorageConnection")
    container = service.get_container_client(LEASE_CONTAINER)
    if not container.exists():
        container.create_container()
    return BlobLeaderLease(container.get_blob_client("supervisor"), ttl)


def servicebus_messaging(settings: Settings) -> ServiceBusMessaging:
    client = servicebus_client(
        settings.servicebus_connection,
        namespace=settings.servicebus_namespace,
        managed_identity_client_id=settings.managed_identity_client_id,
        retry_mode="exponential",
        **sdk_retries(settings),
    )
    return ServiceBusMessaging(client)


def queue_depth(settings: Settings) -> QueueDepth | None:
    """The orders queue's count for admission control: over ARM with the Reader role in Azure,
    or the administration client for a connection string; None when neither is configured."""
    from adapters.servicebus.queue_depth import AdminQueueDepth, ArmQueueDepth  # noqa: PLC0415

    if settings.orders_queue_resource_id:
        return ArmQueueDepth(
            settings.orders_queue_resource_id, _credential(settings), timeout=settings.call_timeout_seconds
        )
    if settings.servicebus_connection:
        return AdminQueueDepth(settings.servicebus_connection)
    return None


def store_builders(settings: Settings) -> StoreBuilders:
    return StoreBuilders(
        states=lambda: cosmos_state_store(settings),
        orders=lambda: sql_orders_repository(settings),
        compensation_log=lambda: table_compensation_log(settings),
        recovery_index=lambda: cosmos_recovery_index(settings),
    )
