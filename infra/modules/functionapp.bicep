// The Function App on the Flex Consumption plan (FC1, Linux, Python 3.13) with one user-assigned
// identity for everything: the deployment package, the host storage (AzureWebJobsStorage, the
// Durable task hub, timer locks), Service Bus, Cosmos DB, SQL, the compensation log table, the
// Supervisor's leader lease and Application Insights. Every connection is identity-based (an
// endpoint + __credential + __clientId); no app setting holds a secret.
//
// The app settings are the contract of settings.py (Settings) and of the bindings in
// function_app.py (%SAS_ORDERS_QUEUE%, %SAS_AGENT_REPLIES_QUEUE%, %SAS_STARTER_SCHEDULE%,
// %SAS_SUPERVISOR_SCHEDULE%, connection "ServiceBusConnection"). On Flex Consumption the runtime
// is set in functionAppConfig, not with FUNCTIONS_WORKER_RUNTIME / FUNCTIONS_EXTENSION_VERSION.

@description('Name of the Function App.')
param name string

@description('Name of the Flex Consumption plan.')
param planName string

@description('Azure region of the plan and the app.')
param location string

@description('Tags applied to the plan and the app (the app also gets azd-service-name).')
param tags object

@description('azd service name of the app in azure.yaml.')
param serviceName string

@description('Resource ID of the app user-assigned identity.')
param identityId string

@description('Client ID of the app user-assigned identity.')
param identityClientId string

@description('Name of the host storage account (AzureWebJobsStorage, deployment package, task hub, leases).')
param hostStorageName string

@description('Blob endpoint of the host storage account.')
param hostBlobEndpoint string

@description('Blob container of the deployment package in the host storage account.')
param deploymentContainerName string

@description('Table endpoint of the storage account holding the compensation log.')
param compensationLogTableEndpoint string

@description('Application Insights connection string (no usable key: the component accepts Entra tokens only).')
param applicationInsightsConnectionString string

@description('Fully qualified Service Bus namespace, e.g. sb-x.servicebus.windows.net.')
param serviceBusFullyQualifiedNamespace string

@description('Name of the orders queue.')
param ordersQueueName string

@description('Resource ID of the orders queue: admission control reads its active-message count over ARM.')
param ordersQueueId string

@description('Name of the agent requests queue.')
param agentRequestsQueueName string

@description('Name of the agent replies queue.')
param agentRepliesQueueName string

@description('Name of the operator alerts queue.')
param operatorAlertsQueueName string

@description('Submitting applications: [{ name, clientId, principalId }] (main.bicep). Their names and client IDs make SAS_SUBMITTERS and the applications App Service Authentication admits.')
param submittingApps array

@description('Application (client) ID of the Entra app registration of this API (its App ID URI is api://<clientId>); empty: no App Service Authentication, and the app refuses every HTTP submission.')
param frontEndClientId string

@description('MaxDeliveryCount of the orders queue (servicebus.bicep).')
param ordersMaxDeliveries int

@description('MaxDeliveryCount of the agent requests queue (servicebus.bicep).')
param agentRequestMaxDeliveries int

@description('Cosmos DB account endpoint.')
param cosmosEndpoint string

@description('Cosmos DB database name.')
param cosmosDatabaseName string

@description('Cosmos DB container of the state records.')
param cosmosContainerName string

@description('Cosmos DB container of the recovery index.')
param cosmosRecoveryContainerName string

@description('Whether the Supervisor uses the recovery index (E14).')
param recoveryIndexEnabled bool

@description('Fully qualified domain name of the SQL server.')
param sqlServerFqdn string

@description('Name of the orders database.')
param sqlDatabaseName string

@description('Workflow version new orders run (C7).')
@allowed([
  'v1'
  'v2'
])
param workflowVersion string

@description('NCRONTAB (six fields) of the Scheduler starter that claims pending orders.')
param starterSchedule string

@description('NCRONTAB (six fields) of the Supervisor.')
param supervisorSchedule string

@description('Seconds the Supervisor leader lease lasts: longer than the Supervisor cadence, 15 to 60.')
@minValue(15)
@maxValue(60)
param leaderLeaseSeconds int

@description('Most instances the app scales out to.')
@minValue(40)
@maxValue(1000)
param maximumInstanceCount int

@description('Memory of each instance in MB.')
@allowed([
  2048
  4096
])
param instanceMemoryMB int

@description('Resource ID of the subnet the app is integrated into (network.bicep).')
param virtualNetworkSubnetId string

@description('Durable Functions storage provider: azureStorage (host.json as committed) or durableTaskScheduler.')
@allowed([
  'azureStorage'
  'durableTaskScheduler'
])
param durableBackend string

@description('The task hub: host.json hubName, and the name of the Durable Task Scheduler task hub.')
param durableTaskHubName string

@description('Endpoint of the Durable Task Scheduler (https://...durabletask.io); empty with azureStorage.')
param durableTaskSchedulerEndpoint string

@description('Resource ID of the Log Analytics workspace the diagnostic settings send to (monitoring.bicep).')
param logAnalyticsId string

// One host.json serves both backends: with the Durable Task Scheduler these app settings override
// it (the host reads AzureFunctionsJobHost__<path> as host.json's <path>). The provider is
// azureManaged, its connection an identity-based DTS connection string (no secret in it), and the
// extension bundle the preview bundle, the one that carries the azureManaged provider for
// non-.NET apps; extensionBundle is host configuration too, overridden the same way (Logic Apps
// Standard sets its bundle like this). docs/deploying.md "Choosing the Durable backend".
var durableTaskSchedulerSettings = {
  AzureFunctionsJobHost__extensions__durableTask__hubName: durableTaskHubName
  AzureFunctionsJobHost__extensions__durableTask__storageProvider__type: 'azureManaged'
  AzureFunctionsJobHost__extensions__durableTask__storageProvider__connectionStringName: 'DURABLE_TASK_SCHEDULER_CONNECTION_STRING'
  DURABLE_TASK_SCHEDULER_CONNECTION_STRING: 'Endpoint=${durableTaskSchedulerEndpoint};Authentication=ManagedIdentity;ClientID=${identityClientId}'
  AzureFunctionsJobHost__extensionBundle__id: 'Microsoft.Azure.Functions.ExtensionBundle.Preview'
  AzureFunctionsJobHost__extensionBundle__version: '[4.29.0, 5.0.0)'
}
var durableSettings = (durableBackend == 'durableTaskScheduler') ? durableTaskSchedulerSettings : {}

// SAS_SUBMITTERS: 'app-a=<clientId>,app-b=<clientId>,' with its last comma dropped where it is
// used. An app without a client ID yet contributes nothing (no filter(): no lambdas here).
var submitterItems = [for app in submittingApps: empty(app.clientId) ? '' : '${app.name}=${app.clientId},']
var submitterPairs = join(submitterItems, '')
var submitters = empty(submitterPairs) ? '' : take(submitterPairs, length(submitterPairs) - 1)
// Easy Auth admits only these applications' tokens (the appid / azp claim); an app listed without a
// client ID yet adds '' (matches no caller). Register its client ID before setting frontEndClientId.
var allowedApplications = [for app in submittingApps: app.clientId]

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': serviceName })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    publicNetworkAccess: 'Enabled'
    // Outbound through the virtual network: SQL admits only this subnet (network.bicep, sql.bicep).
    virtualNetworkSubnetId: virtualNetworkSubnetId
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${hostBlobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      // The minimum of pyproject.toml's requires-python, as the agent's image (make iac checks
      // both): 3.13 is the first whose worker the app pins (azure-functions-runtime).
      runtime: {
        name: 'python'
        version: '3.13'
      }
    }
  }
}

resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: app
  name: 'appsettings'
  properties: union(durableSettings, {
    // Functions host storage: AzureWebJobsStorage, the Durable task hub (host.json hubName), timer locks.
    AzureWebJobsStorage__accountName: hostStorageName
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    // Telemetry with Entra auth (the component has DisableLocalAuth).
    APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsightsConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'Authorization=AAD;ClientId=${identityClientId}'
    // Service Bus bindings: connection="ServiceBusConnection".
    ServiceBusConnection__fullyQualifiedNamespace: serviceBusFullyQualifiedNamespace
    ServiceBusConnection__credential: 'managedidentity'
    ServiceBusConnection__clientId: identityClientId
    // The composition root (bootstrap.py): azure profile, identity for the SDK clients.
    SAS_PROFILE: 'azure'
    AZURE_CLIENT_ID: identityClientId
    // State store (adapters/azure_profile.py cosmos_state_store).
    CosmosDBConnection__accountEndpoint: cosmosEndpoint
    CosmosDBConnection__credential: 'managedidentity'
    CosmosDBConnection__clientId: identityClientId
    SAS_COSMOS_DATABASE: cosmosDatabaseName
    SAS_COSMOS_CONTAINER: cosmosContainerName
    // 429s retried by the SDK within a step's window (docs/design.md "Policies and their defaults")
    SAS_COSMOS_THROTTLE_RETRIES: '5'
    SAS_COSMOS_THROTTLE_MAX_WAIT_SECONDS: '10'
    SAS_COSMOS_RECOVERY_CONTAINER: cosmosRecoveryContainerName
    SAS_RECOVERY_INDEX: recoveryIndexEnabled ? 'true' : 'false'
    // Fixed for the life of an index: a different bucket size misses the entries already written.
    SAS_RECOVERY_BUCKET_MINUTES: '5'
    // Orders database: ODBC Driver 18 with the managed identity; no secret in the string.
    SqlConnection: 'Driver={ODBC Driver 18 for SQL Server};Server=tcp:${sqlServerFqdn},1433;Database=${sqlDatabaseName};Encrypt=yes;TrustServerCertificate=no;Authentication=ActiveDirectoryMsi;UID=${identityClientId}'
    SAS_SQL_DIALECT: 'sqlserver'
    // Compensation log table (C5: its own account, classified like the orders it tracks).
    CompensationLogConnection__tableServiceUri: compensationLogTableEndpoint
    CompensationLogConnection__credential: 'managedidentity'
    CompensationLogConnection__clientId: identityClientId
    // The Supervisor's leader lease (blob container "leases" in the host storage account).
    LeaseStorageConnection__blobServiceUri: hostBlobEndpoint
    LeaseStorageConnection__credential: 'managedidentity'
    LeaseStorageConnection__clientId: identityClientId
    // Queues (servicebus.bicep) and their delivery counts.
    SAS_ORDERS_QUEUE: ordersQueueName
    // C3: the front end's backlog counts this queue's active messages (Reader on it: rbac.bicep),
    // read once per 5 s per instance; Retry-After sends a refused caller back to such a read.
    SAS_ORDERS_QUEUE_RESOURCE_ID: ordersQueueId
    SAS_QUEUE_DEPTH_CACHE_SECONDS: '5'
    SAS_ORDERS_MAX_DELIVERIES: string(ordersMaxDeliveries)
    SAS_AGENT_REQUESTS_QUEUE: agentRequestsQueueName
    SAS_AGENT_REPLIES_QUEUE: agentRepliesQueueName
    SAS_AGENT_REQUEST_MAX_DELIVERIES: string(agentRequestMaxDeliveries)
    SAS_ALERTS_QUEUE: operatorAlertsQueueName
    // E16: the registered submitting apps, name=clientId pairs; an app's status queue is
    // status-<name>. Apps listed without a client ID yet are left out (no one can call as them).
    SAS_SUBMITTERS: submitters
    // E16: the front end verifies each caller's token itself (adapters/entra_tokens.py): a v2.0
    // token of this tenant's issuer, for the front end's registration (its client ID: v2.0 tokens'
    // aud), an application token with the Orders.Submit app role (infra/scripts/app_roles.py).
    // Without frontEndClientId the audience is empty and the front end refuses every request.
    SAS_AUTH_AUTHORITY: environment().authentication.loginEndpoint
    SAS_AUTH_TENANT_ID: tenant().tenantId
    SAS_AUTH_AUDIENCE: frontEndClientId
    // Scheduler, Supervisor and retry policy (settings.py).
    SAS_WORKFLOW_VERSION: workflowVersion
    SAS_STARTER_SCHEDULE: starterSchedule
    SAS_SUPERVISOR_SCHEDULE: supervisorSchedule
    SAS_LEADER_LEASE_SECONDS: string(leaderLeaseSeconds)
    SAS_AGENT_MAX_ATTEMPTS: '3'
    SAS_MAX_IN_FLIGHT: '50'
    SAS_BACKLOG_THRESHOLD: '500'
    SAS_BACKLOG_RETRY_AFTER_SECONDS: '5'
    SAS_CLAIM_BATCH_SIZE: '20'
    SAS_START_GRACE_SECONDS: '60'
    SAS_STEP_TIMEOUT_SECONDS: '30'
    SAS_MAX_CALLS_PER_STEP: '30'
    SAS_QUICK_RETRIES: '2'
    SAS_EXTENDED_RETRIES: '2'
    SAS_COOLDOWN_SECONDS: '300'
    SAS_SUPERVISOR_LOOKBACK_HOURS: '168'
    SAS_SUPERVISOR_PAGE_SIZE: '100'
    SAS_SUPERVISOR_MAX_PER_RUN: '500'
    // Transient faults (docs/operating.md "Transient faults"): each call starts no try after the budget,
    // each try bounded by the two timeouts (a caller hears within 10 + 3 s), then a submission is
    // postponed (5 s doubling to 30 s, 150 times: about 75 minutes).
    SAS_RETRY_BUDGET_SECONDS: '10'
    SAS_RETRY_FIRST_WAIT_SECONDS: '0.2'
    SAS_RETRY_MAX_WAIT_SECONDS: '5'
    SAS_CONNECT_TIMEOUT_SECONDS: '2'
    SAS_CALL_TIMEOUT_SECONDS: '3'
    SAS_POSTPONE_FIRST_SECONDS: '5'
    SAS_POSTPONE_MAX_SECONDS: '30'
    SAS_POSTPONE_LIMIT: '150'
  })
}

// E16: App Service Authentication (Easy Auth) is an extra layer in front of the app, not what the
// app relies on: the front end verifies every caller's token itself (SAS_AUTH_* above) and trusts
// no header, so a plan where Easy Auth does not enforce (Flex Consumption's documentation said
// "Unauthenticated callers currently aren't blocked") leaves the app exactly as strict. Where it
// does enforce, it checks each bearer token before any function runs: issued by this tenant, for
// this API (api://<frontEndClientId>, or its client ID), to one of the registered submitting apps
// (allowedApplications); anything else gets 401 or 403. Without frontEndClientId nothing is
// deployed here. The HTTP routes need no function key (AuthLevel.ANONYMOUS): the token is the
// authorisation.
//
// Nothing is excluded (no excludedPaths):
// - the Python Durable client (azure-functions-durable) calls the extension on its local RPC
//   endpoint (rpcBaseUrl, 127.0.0.1), not /runtime/webhooks/durabletask through the front door:
//   the extension added that endpoint because those calls "don't work at all when Easy Auth is
//   protecting access to the function app" (Azure/azure-functions-durable-extension PR #1166);
//   this app hands out no Durable status URLs;
// - the host's /admin endpoints are not blocked by Easy Auth (Azure/azure-functions-ux #499) and
//   need the master key anyway.
resource authSettings 'Microsoft.Web/sites/config@2024-04-01' = if (!empty(frontEndClientId)) {
  parent: app
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
    }
    globalValidation: {
      requireAuthentication: true
      unauthenticatedClientAction: 'Return401'
    }
    httpSettings: {
      requireHttps: true
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          // v2.0 issuer: the API registration gets requestedAccessTokenVersion 2 (infra/README.md).
          openIdIssuer: '${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0'
          clientId: frontEndClientId
        }
        validation: {
          allowedAudiences: [
            'api://${frontEndClientId}'
          ]
          defaultAuthorizationPolicy: {
            allowedApplications: allowedApplications
          }
        }
      }
    }
    login: {
      tokenStore: {
        enabled: false
      }
    }
  }
}

// The host's logs (allLogs: FunctionAppLogs, AppServiceAuthenticationLogs), in the workspace.
resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: app
  properties: {
    workspaceId: logAnalyticsId
    logs: [
      {
        categoryGroup: 'allLogs'
        enabled: true
      }
    ]
  }
}

output id string = app.id
output name string = app.name
output defaultHostName string = app.properties.defaultHostName
// The Scheduler's limits, for the workbook's backlog and in-flight chart (workbook.bicep).
output backlogThreshold string = appSettings.properties.SAS_BACKLOG_THRESHOLD
output maxInFlight string = appSettings.properties.SAS_MAX_IN_FLIGHT

// What SAS_SUBMITTERS says, for the post-provision step that assigns each of these apps the
// front end's Orders.Submit app role (infra/scripts/app_roles.py).
output submitters string = submitters
