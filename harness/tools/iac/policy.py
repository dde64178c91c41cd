"""The committed decisions the checker enforces. Everything else it derives from the code and the Bicep.

Change a list here in the same commit as the infra or code change that needs it, with its reason.
"""

# Built-in roles a role assignment may grant: least privilege, data-plane roles only (no Owner,
# Contributor or User Access Administrator). Name -> role definition GUID, as Azure publishes them.
ALLOWED_ROLES: dict[str, str] = {
    "Azure Service Bus Data Sender": "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39",
    "Azure Service Bus Data Receiver": "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0",
    # Only the Function App's identity, only on the queues its Service Bus triggers read: target-based
    # scaling reads their length, which needs Manage (TRIGGER_QUEUE_ROLES; trigger_roles.py).
    "Azure Service Bus Data Owner": "090c5cfd-751d-490a-894a-3ce6f1109419",
    "Storage Blob Data Owner": "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    "Storage Queue Data Contributor": "974c5e8b-45b9-4653-ba55-5f855dd0fb88",
    "Storage Table Data Contributor": "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
    "Monitoring Metrics Publisher": "3913510d-42f4-4e42-8a64-420c390055eb",
    "AcrPull": "7f951dda-4ed3-4680-a7ca-43fe172d538d",
    # Control-plane read, only the Function App's, only on the orders queue: admission control reads
    # its countDetails over ARM (adapters/servicebus/queue_depth.py).
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
    # Only the Function App's identity, only on the Durable Task Scheduler's task hub (dts.bicep):
    # the role Durable Functions apps need (Durable Task Worker lacks the client operations). GUID as
    # Microsoft's DTS templates and the built-in roles list publish it (durable.py checks the grant).
    "Durable Task Data Contributor": "0ad04412-c4d5-4796-b79c-f76d14c8d402",
    # Cosmos DB's own data-plane roles (sqlRoleAssignments, not Microsoft.Authorization).
    "Cosmos DB Built-in Data Reader": "00000000-0000-0000-0000-000000000001",
    # Only the deployer's, with grantDeployerOperatorRoles, on one table each (OPERATOR_ROLES):
    # `ops show` reads the compensation log, `ops instances` the task hub's Instances table,
    # `ops replay export` its Instances and History tables.
    "Storage Table Data Reader": "76199698-9eea-4c19-bc75-cec21354c6b6",
    "Cosmos DB Built-in Data Contributor": "00000000-0000-0000-0000-000000000002",
}

# Settings the composition root reads that a target need not set, with the reason. Targets:
# "azure" (the Function App's and the agent Container App's settings in Bicep) and "local"
# (local.settings.sample.json, for Core Tools and docker-compose). Every other alias of
# settings.py ``Settings`` and agent_worker/settings.py ``AgentSettings`` is required.
AZURE = "azure"
LOCAL = "local"
OPTIONAL_SETTINGS: dict[str, tuple[frozenset[str], str]] = {
    "SAS_DATA_DIR": (frozenset({AZURE, LOCAL}), "the embedded profile's SQLite files"),
    "LOCAL_SERVICEBUS_PATH": (frozenset({AZURE, LOCAL}), "the local Service Bus file"),
    "AZURE_CLIENT_ID": (frozenset({LOCAL}), "a managed identity's client ID exists only in Azure"),
    "AGENT_REMOTE_AUDIENCE": (
        frozenset({LOCAL}),
        "the agent presents an Entra token only in Azure; a local remote admits any caller",
    ),
    "SAS_ORDERS_QUEUE_RESOURCE_ID": (
        frozenset({LOCAL}),
        "an ARM resource exists only in Azure; locally the bus or the connection string counts",
    ),
}

# local.settings.sample.json is the deployment's settings for Core Tools against the emulators
# (docs/deploying.md "What local.settings.sample.json holds"): each value the Bicep sets (the
# Function App's and the agent Container App's), else the code's default; every setting the Bicep
# sets; nothing neither knows (cross_checks.py). Only these differ, each with its reason: someone
# following the sample runs what Azure runs, not a knob that drifted (a 300 s postponement once).
SAMPLE_LOCAL_VALUES: dict[str, str] = {
    "SAS_PROFILE": "emulators here, azure there (cross_checks.py checks both)",
    "SAS_STARTER_SCHEDULE": "faster timers locally: the starter every 5 s, not 10",
    "SAS_SUPERVISOR_SCHEDULE": "faster timers locally: the Supervisor every 15 s, not 30",
    "SAS_LEADER_LEASE_SECONDS": "past the local Supervisor's 15 s period, as Azure's 45 s is past its 30 s",
    "SAS_AUTH_AUTHORITY": "the local issuer (harness/standins/local_issuer.py), not Entra ID",
    "SAS_AUTH_TENANT_ID": "the local issuer's tenant; in Azure the deployment's own",
    "SAS_AUTH_AUDIENCE": "the local issuer's front end audience; in Azure frontEndClientId",
    "SAS_SUBMITTERS": "the local apps app-a and app-b, whose tokens the local issuer signs",
    # Connections: in Azure X__<endpoint>, X__credential and X__clientId (a managed identity); here
    # X, the emulator's connection string. X listed here stands for those parts of the Bicep's too.
    "AzureWebJobsStorage": "Azurite (UseDevelopmentStorage=true) for the host's storage",
    "ServiceBusConnection": "the Service Bus emulator's documented development connection string",
    "CosmosDBConnection": "the Cosmos DB emulator's well-known endpoint and key",
    "SqlConnection": "the compose SQL Server with its dev-only sa login; in Azure the managed identity",
    "CompensationLogConnection": "Azurite's table service",
    "LeaseStorageConnection": "Azurite's blob service",
}
# Settings the deployment sets that the sample leaves out, and why (besides OPTIONAL_SETTINGS'
# local ones, and the parts of a connection listed in SAMPLE_LOCAL_VALUES).
_TELEMETRY_FILES = "no Application Insights locally: telemetry goes to files"
# durableBackend=durableTaskScheduler: the sample keeps the task hub in Azurite, and docs/deploying.md
# "Choosing the Durable backend" says what to add for the Durable Task Scheduler emulator.
_AZURE_STORAGE_BACKEND = "the sample runs the azureStorage backend (Azurite, host.json's bundle)"
AZURE_ONLY_SETTINGS: dict[str, str] = {
    "APPLICATIONINSIGHTS_CONNECTION_STRING": _TELEMETRY_FILES,
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING": _TELEMETRY_FILES,
    "AzureFunctionsJobHost__extensions__durableTask__hubName": _AZURE_STORAGE_BACKEND,
    "AzureFunctionsJobHost__extensions__durableTask__storageProvider__type": _AZURE_STORAGE_BACKEND,
    "AzureFunctionsJobHost__extensions__durableTask__storageProvider__connectionStringName": (
        _AZURE_STORAGE_BACKEND
    ),
    "DURABLE_TASK_SCHEDULER_CONNECTION_STRING": _AZURE_STORAGE_BACKEND,
    "AzureFunctionsJobHost__extensionBundle__id": _AZURE_STORAGE_BACKEND,
    "AzureFunctionsJobHost__extensionBundle__version": _AZURE_STORAGE_BACKEND,
}
# Settings the sample sets that neither the code nor the Bicep knows, and why.
SAMPLE_ONLY_SETTINGS: dict[str, str] = {
    "FUNCTIONS_WORKER_RUNTIME": "Core Tools needs it; Flex Consumption has the runtime in functionAppConfig",
}

# Settings the platform sets and a deployment must never set. The front end no longer reads
# WEBSITE_AUTH_ENABLED (it verifies tokens itself, E16); set by hand it would still misreport
# whether App Service Authentication is on, to anything else that reads it.
PLATFORM_SETTINGS: tuple[str, ...] = ("WEBSITE_AUTH_ENABLED",)

# How an identity-based connection names its parts: a connection ``X`` (a binding's
# ``connection=``, or a Settings alias that has ``X__...`` siblings) is set by ``X`` itself
# (a connection string: emulators only) or by ``X__<one of these>`` (managed identity).
IDENTITY_SUFFIXES: tuple[str, ...] = (
    "fullyQualifiedNamespace",
    "accountEndpoint",
    "accountName",
    "serviceUri",
    "blobServiceUri",
    "queueServiceUri",
    "tableServiceUri",
)

# The Functions host's own storage: timers, the Durable task hub. No binding names it.
HOST_CONNECTIONS: tuple[str, ...] = ("AzureWebJobsStorage",)

# Settings whose value must equal a queue's MaxDeliveryCount (see their comments in
# settings.py): setting -> the setting that names the queue.
MAX_DELIVERIES_OF_QUEUE: dict[str, str] = {
    "SAS_ORDERS_MAX_DELIVERIES": "SAS_ORDERS_QUEUE",
    "SAS_AGENT_REQUEST_MAX_DELIVERIES": "SAS_AGENT_REQUESTS_QUEUE",
}

# The settings that name the Cosmos DB database and container the state store uses.
COSMOS_DATABASE_SETTING = "SAS_COSMOS_DATABASE"
COSMOS_CONTAINER_SETTING = "SAS_COSMOS_CONTAINER"

# Service Bus queue rules (E9, E18): duplicate detection, dead-lettering on expiry, and a
# small max delivery count.
MAX_DELIVERY_COUNT_LIMIT = 10

# The Container App that runs agent_worker: its azd service name (azure.yaml) or, failing a
# tag, a symbol or name containing this word.
AGENT_SERVICE = "agent"

# --- Submitting apps (E16): what an app may submit, read or receive follows from its identity ---

# main.bicep's parameters: the registered apps ([{ name, clientId, principalId }]) and the Entra
# app registration of the front end API (App Service Authentication is on whenever it is set).
SUBMITTING_APPS_PARAM = "submittingApps"
SUBMITTING_APP_KEYS: tuple[str, ...] = ("name", "clientId", "principalId")
FRONT_END_CLIENT_ID_PARAM = "frontEndClientId"
# The app's registry of submitting apps: "name=clientId,..." (domain/apps.py Registry.parse).
SUBMITTERS_SETTING = "SAS_SUBMITTERS"
# Each app's private status queue is this prefix and its name.
STATUS_QUEUE_PREFIX = "status-"
# A registered name, as domain/apps.py APP_NAME accepts it (and a valid queue name suffix).
SUBMITTER_NAME = r"[a-z][a-z0-9-]{0,29}"

# What each Service Bus data role allows on its scope. A submitting app's identity may hold
# Receiver on its own status-<name> queue and nothing else: it submits over HTTP only (the
# Function App is the only sender to orders), statuses reach it from the Function App alone, and
# a namespace-wide role would reach every other app's queue.
SERVICE_BUS_DATA_OWNER = ALLOWED_ROLES["Azure Service Bus Data Owner"]
SERVICE_BUS_ROLES: dict[str, tuple[str, frozenset[str]]] = {
    ALLOWED_ROLES["Azure Service Bus Data Sender"]: ("Azure Service Bus Data Sender", frozenset({"send"})),
    ALLOWED_ROLES["Azure Service Bus Data Receiver"]: (
        "Azure Service Bus Data Receiver",
        frozenset({"receive"}),
    ),
    SERVICE_BUS_DATA_OWNER: ("Azure Service Bus Data Owner", frozenset({"send", "receive", "manage"})),
}
SUBMITTER_ROLE = ALLOWED_ROLES["Azure Service Bus Data Receiver"]

# App Service Authentication (Microsoft.Web/sites/config 'authsettingsV2') whenever
# frontEndClientId is set: every request needs a valid token, an unauthenticated one gets 401.
EASY_AUTH_CONFIG = "authsettingsV2"
EASY_AUTH_REQUIRED: dict[tuple[str, ...], object] = {
    ("platform", "enabled"): True,
    ("globalValidation", "requireAuthentication"): True,
    ("globalValidation", "unauthenticatedClientAction"): "Return401",
    ("identityProviders", "azureActiveDirectory", "enabled"): True,
}

# --- The Function App's Service Bus triggers (trigger_roles.py) ---------------------------------

# The decorators of function_app.py that bind a Service Bus queue trigger.
SERVICE_BUS_QUEUE_TRIGGERS: tuple[str, ...] = ("service_bus_queue_trigger",)
# Topic triggers need roles on a subscription; the rule does not know them yet and says so.
SERVICE_BUS_TOPIC_TRIGGERS: tuple[str, ...] = ("service_bus_topic_trigger",)
# What the Function App's identity must hold on each queue one of its Service Bus triggers reads,
# scoped to that queue, and why. Data Owner is the only built-in role with Service Bus's Manage
# right, which the extension's target-based scaler needs to read the queue's length
# (GetQueueRuntimePropertiesAsync); without it, scaling falls back to the incremental scale monitor
# ("With Listen rights scaling reverts to incremental scale", functions-target-based-scaling). It
# is allowed nowhere else: not to another identity, not on another queue, not at a wider scope.
TRIGGER_QUEUE_ROLES: dict[str, str] = {
    ALLOWED_ROLES["Azure Service Bus Data Receiver"]: "the trigger receives, completes and dead-letters",
    ALLOWED_ROLES["Azure Service Bus Data Owner"]: (
        "Flex Consumption's target-based scaling reads the queue length, which needs Manage"
    ),
}

# --- Deployment options (variants.py): main.bicep's parameters that switch resources on and off ---

# The Durable Functions storage provider, and the values variants.py evaluates.
DURABLE_BACKEND_PARAM = "durableBackend"
AZURE_STORAGE = "azureStorage"
DURABLE_TASK_SCHEDULER = "durableTaskScheduler"
DURABLE_BACKENDS: tuple[str, ...] = (AZURE_STORAGE, DURABLE_TASK_SCHEDULER)
# Private endpoints for the data services, their public network access off.
NETWORK_ISOLATION_PARAM = "networkIsolation"
# A first deployment's options (first_deployment.py): the simulator as the remote service, and the
# deployer's data-plane roles for `python -m ops`. main.parameters.json turns both on through azd
# variables; main.bicep's defaults (off) are production's. The checker evaluates both values.
DEPLOY_SIMULATOR_PARAM = "deploySimulator"
OPERATOR_ROLES_PARAM = "grantDeployerOperatorRoles"
# The sample submitting app (sampleAppName, its registration's certificate on the deployer's
# machine): main.bicep adds it to the registered apps only with this on. main.parameters.json
# must default its azd variable to the simulator's (SAMPLE_APP_VALUE), so that production, which
# turns the simulator off, leaves the sample app out unless it asks for it.
SAMPLE_APP_PARAM = "sampleApp"
SAMPLE_APP_NAME_PARAM = "sampleAppName"
SAMPLE_APP_VALUE = "${SAS_SAMPLE_APP=${SAS_DEPLOY_SIMULATOR=true}}"
DEPLOYMENT_OPTIONS: tuple[str, ...] = (
    DURABLE_BACKEND_PARAM,
    NETWORK_ISOLATION_PARAM,
    DEPLOY_SIMULATOR_PARAM,
    OPERATOR_ROLES_PARAM,
    SAMPLE_APP_PARAM,
)

# What the Function App's settings must say on the Durable Task Scheduler (durable.py): the host
# reads AzureFunctionsJobHost__<path> as host.json's <path>, so one host.json serves both backends.
HOST_OVERRIDE = "AzureFunctionsJobHost__"
DTS_PROVIDER_TYPE_SETTING = HOST_OVERRIDE + "extensions__durableTask__storageProvider__type"
DTS_PROVIDER_TYPE = "azureManaged"
DTS_CONNECTION_NAME_SETTING = HOST_OVERRIDE + "extensions__durableTask__storageProvider__connectionStringName"
DTS_HUB_NAME_SETTING = HOST_OVERRIDE + "extensions__durableTask__hubName"
# Identity-based: no key in the string; ClientID names the user-assigned identity.
DTS_CONNECTION_PARTS: tuple[str, ...] = ("Endpoint=", "Authentication=ManagedIdentity", "ClientID=")
# Non-.NET apps get the azureManaged provider from the preview extension bundle.
BUNDLE_ID_SETTING = HOST_OVERRIDE + "extensionBundle__id"
DTS_BUNDLE_ID = "Microsoft.Azure.Functions.ExtensionBundle.Preview"
DURABLE_TASK_DATA_CONTRIBUTOR = ALLOWED_ROLES["Durable Task Data Contributor"]

# --- The network (network.py) -------------------------------------------------------------------

# The services that hold the orders' data and the app's state: with networkIsolation, each has its
# public network access 'Disabled' and a private endpoint. Resource type -> the SKU it needs for one.
DATA_SERVICES: tuple[str, ...] = (
    "Microsoft.Storage/storageAccounts",
    "Microsoft.DocumentDB/databaseAccounts",
    "Microsoft.Sql/servers",
    "Microsoft.ServiceBus/namespaces",
    "Microsoft.DurableTask/schedulers",
)
# Private endpoints need the Premium tier of Service Bus.
PRIVATE_ENDPOINT_SKUS: dict[str, str] = {"Microsoft.ServiceBus/namespaces": "Premium"}
# Every resource with a public endpoint that docs/deploying.md lists by mode: the data services,
# and the exceptions (the front end's API, telemetry ingestion, the image registry). The property
# that says whether its public endpoint is on (absent: on, as Azure defaults).
PUBLIC_ACCESS_PROPERTY: dict[str, str] = {
    **{service: "publicNetworkAccess" for service in DATA_SERVICES},
    "Microsoft.Web/sites": "publicNetworkAccess",
    "Microsoft.Insights/components": "publicNetworkAccessForIngestion",
    "Microsoft.ContainerRegistry/registries": "publicNetworkAccess",
}
PUBLIC_ENDPOINTS_DOC = "docs/deploying.md"
# With networkIsolation off, the data services whose tier takes virtual network rules admit only the
# subnets the app and the agent run in (and the operator's address, from a parameter). Resource type
# -> the service endpoint the admitted subnet must carry for its rule to take effect. Service Bus
# Standard takes no network rules (Premium only) and the Durable Task Scheduler only an IP allow
# list, so both stay open; docs/deploying.md "Private network" lists each with its reason.
SUBNET_RESTRICTED: dict[str, str] = {
    "Microsoft.DocumentDB/databaseAccounts": "Microsoft.AzureCosmosDB",
    "Microsoft.Storage/storageAccounts": "Microsoft.Storage",
    "Microsoft.Sql/servers": "Microsoft.Sql",
}
# Module calls (from main.bicep) whose account stays open to every network with networkIsolation
# off, with the reason: the host account receives the deployment package from the platform, outside
# the app's subnet (main.bicep, docs/deploying.md "Private network").
OPEN_BY_DEFAULT: dict[tuple[str, ...], str] = {
    ("hostStorage",): "Flex Consumption writes the deployment package to it from outside the app's subnet",
}

# --- A first deployment (first_deployment.py) ------------------------------------------------------

# The simulator's Container App: its azd service name (azure.yaml). Internal ingress only, its own
# identity with AcrPull alone, in the agent's environment.
SIMULATOR_SERVICE = "simulator"
SIMULATOR_ROLES: frozenset[str] = frozenset({ALLOWED_ROLES["AcrPull"]})
# main.bicep's deploying principal.
DEPLOYER_PARAM = "principalId"
# What the deployer may hold with grantDeployerOperatorRoles, and nothing else: role GUID -> the
# scopes it may have (a queue's name, "status-*" for the sample app's status queue, "database" for
# Cosmos DB's database, one of the two tables below) and which ops command needs it.
COMPENSATION_LOG_TABLE = "the compensation log table"
# The Azure Storage backend's <hubName>Instances table (host.json hubName): on the Durable Task
# Scheduler the task hub is not in storage, and the deployer gets no role for it.
TASK_HUB_INSTANCES_TABLE = "the task hub's Instances table"
TASK_HUB_HISTORY_TABLE = "the task hub's History table"
TASK_HUB_TABLES = frozenset({TASK_HUB_INSTANCES_TABLE, TASK_HUB_HISTORY_TABLE})
OPERATOR_ROLES: dict[str, tuple[frozenset[str], str]] = {
    ALLOWED_ROLES["Azure Service Bus Data Receiver"]: (
        frozenset({"operator-alerts", "orders", "agent-requests", "agent-replies", "status-*"}),
        "ops alerts / ack / drain, ops dlq list|resubmit, ops smoke and ops show peek or receive there",
    ),
    ALLOWED_ROLES["Azure Service Bus Data Sender"]: (
        frozenset({"orders", "agent-requests", "agent-replies"}),
        "ops dlq resubmit sends a dead letter back to its queue",
    ),
    ALLOWED_ROLES["Cosmos DB Built-in Data Reader"]: (
        frozenset({"database"}),
        "ops status, show, list and watch read state records",
    ),
    ALLOWED_ROLES["Storage Table Data Reader"]: (
        frozenset({COMPENSATION_LOG_TABLE, *TASK_HUB_TABLES}),
        "ops show reads the compensation log, ops instances the task hub's Instances table, "
        "ops replay export its Instances and History tables",
    ),
}
