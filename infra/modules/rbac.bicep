// Every role assignment, least privilege, each with its principalType:
//
// | identity        | resource                                   | role                             |
// |-----------------|--------------------------------------------|----------------------------------|
// | app             | host storage account                       | Storage Blob Data Owner, Storage Queue Data Contributor, Storage Table Data Contributor (Functions host, Durable task hub, timer locks, leader lease, deployment package) |
// | app             | table compensationlog (data account)       | Storage Table Data Contributor   |
// | app             | queue orders                               | Data Receiver (trigger, dead-letter) + Data Sender (front end POST /api/orders) + Data Owner (scaling, below) + Reader (admission control, below) |
// | app             | queue agent-requests                       | Data Sender                      |
// | app             | queue agent-replies                        | Data Receiver (trigger) + Data Owner (scaling, below) |
// | app             | queue operator-alerts                      | Data Sender                      |
// | app             | each queue status-<app>                    | Data Sender                      |
// | app             | Cosmos DB database (data plane)            | Cosmos DB Built-in Data Contributor |
// | app, agent      | Application Insights                       | Monitoring Metrics Publisher     |
// | agent           | queue agent-requests                       | Data Receiver                    |
// | agent           | queue agent-replies                        | Data Sender                      |
// | agent           | container registry                         | AcrPull                          |
// | simulator       | container registry                         | AcrPull (its only role; deploySimulator) |
// | submitting app  | its own queue status-<name>                | Data Receiver (the only receiver, E16); nothing else |
//
// Data Owner, only on the two queues the Function App's Service Bus triggers read (orders,
// agent-replies), only for its identity: on Flex Consumption the app is scaled by the Service Bus
// extension's target-based scaler, which reads each trigger queue's active message count with the
// administration client (GetQueueRuntimePropertiesAsync). That needs Service Bus's Manage right,
// which among built-in roles only Data Owner has; with Receiver alone the scaler gets "Unauthorized"
// and scaling "reverts to incremental scale" (one instance at a time, from peeked messages):
// https://learn.microsoft.com/azure/azure-functions/functions-target-based-scaling#service-bus-queues-and-topics
// https://github.com/Azure/azure-sdk-for-net/blob/main/sdk/servicebus/Microsoft.Azure.WebJobs.Extensions.ServiceBus/src/Listeners/ServiceBusMetricsProvider.cs
// Scoped to the queue, Data Owner also lets the app change or delete that queue; nothing else gets
// it (python -m harness.tools.iac: harness/tools/iac/trigger_roles.py). Receiver stays: it is the trigger's own
// right, and it keeps the trigger working if Data Owner is ever removed. infra/README.md has more.
//
// Reader, only on the orders queue, only for the app's identity: admission control (C3) reads the
// queue's active-message count with an ARM GET of the queue resource (properties.countDetails),
// which needs Microsoft.ServiceBus/namespaces/queues/read and nothing more. It does not lean on
// the scaler's Data Owner, which is there for Flex Consumption's scaler alone.
//
// Submitting apps send nothing to Service Bus: they post orders to the front end over HTTP
// (App Service Authentication, functionapp.bicep), and the Function App is the only sender to
// orders. python -m harness.tools.iac proves it (harness/tools/iac/isolation.py).
// The app's SQL access is a database user created by the post-provision script (sql/users.sql).

@description('Principal ID of the Function App identity.')
param appPrincipalId string

@description('Principal ID of the agent identity.')
param agentPrincipalId string

@description('Submitting applications: [{ name, clientId, principalId }]; an empty principalId gets no role yet.')
param submittingApps array

@description('Name of the host storage account.')
param hostStorageName string

@description('Name of the storage account holding the compensation log.')
param dataStorageName string

@description('Name of the compensation log table.')
param compensationLogTableName string

@description('Name of the Application Insights component.')
param applicationInsightsName string

@description('Name of the Service Bus namespace.')
param serviceBusName string

@description('Name of the orders queue.')
param ordersQueueName string

@description('Name of the agent requests queue.')
param agentRequestsQueueName string

@description('Name of the agent replies queue.')
param agentRepliesQueueName string

@description('Name of the operator alerts queue.')
param operatorAlertsQueueName string

@description('Name of the Cosmos DB account.')
param cosmosAccountName string

@description('Name of the Cosmos DB database the app reads and writes.')
param cosmosDatabaseName string

@description('Name of the container registry of the agent image.')
param registryName string

@description('Principal ID of the simulator identity (deploySimulator); empty: no simulator.')
param simulatorPrincipalId string = ''

// Built-in role definition IDs (the same in every tenant).
var roles = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
  serviceBusDataOwner: '090c5cfd-751d-490a-894a-3ce6f1109419'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
  acrPull: '7f951dda-4ed3-4680-a7ca-43fe172d538d'
  reader: 'acdd72a7-3385-48ef-bd42-f606fba81ae7'
}
// Cosmos DB Built-in Data Contributor: a data-plane role definition of the account.
var cosmosDataContributor = '00000000-0000-0000-0000-000000000002'

// --- Storage ---------------------------------------------------------------------------------

resource hostStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: hostStorageName
}

resource dataStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: dataStorageName
}

resource dataTableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' existing = {
  parent: dataStorage
  name: 'default'
}

resource compensationLogTable 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' existing = {
  parent: dataTableService
  name: compensationLogTableName
}

resource appHostBlob 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, appPrincipalId, roles.storageBlobDataOwner)
  scope: hostStorage
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataOwner)
  }
}

resource appHostQueue 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, appPrincipalId, roles.storageQueueDataContributor)
  scope: hostStorage
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageQueueDataContributor)
  }
}

resource appHostTable 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(hostStorage.id, appPrincipalId, roles.storageTableDataContributor)
  scope: hostStorage
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
  }
}

resource appCompensationLog 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(compensationLogTable.id, appPrincipalId, roles.storageTableDataContributor)
  scope: compensationLogTable
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
  }
}

// --- Application Insights (Entra-only ingestion) ---------------------------------------------

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

resource appTelemetry 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, appPrincipalId, roles.monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.monitoringMetricsPublisher)
  }
}

resource agentTelemetry 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, agentPrincipalId, roles.monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    principalId: agentPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.monitoringMetricsPublisher)
  }
}

// --- Service Bus: every role scoped to one queue ---------------------------------------------

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusName
}

resource ordersQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: namespace
  name: ordersQueueName
}

resource agentRequestsQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: namespace
  name: agentRequestsQueueName
}

resource agentRepliesQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: namespace
  name: agentRepliesQueueName
}

resource operatorAlertsQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: namespace
  name: operatorAlertsQueueName
}

resource appOrdersReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(ordersQueue.id, appPrincipalId, roles.serviceBusDataReceiver)
  scope: ordersQueue
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
  }
}

resource appOrdersSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(ordersQueue.id, appPrincipalId, roles.serviceBusDataSender)
  scope: ordersQueue
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
  }
}

// Target-based scaling reads the orders queue's length (Manage): see the header.
resource appOrdersScaling 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(ordersQueue.id, appPrincipalId, roles.serviceBusDataOwner)
  scope: ordersQueue
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataOwner)
  }
}

// Admission control reads the orders queue's countDetails over ARM: see the header.
resource appOrdersCount 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(ordersQueue.id, appPrincipalId, roles.reader)
  scope: ordersQueue
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.reader)
  }
}

resource appAgentRequestsSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(agentRequestsQueue.id, appPrincipalId, roles.serviceBusDataSender)
  scope: agentRequestsQueue
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
  }
}

resource appAgentRepliesReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(agentRepliesQueue.id, appPrincipalId, roles.serviceBusDataReceiver)
  scope: agentRepliesQueue
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
  }
}

// Target-based scaling reads the agent-replies queue's length (Manage): see the header.
resource appAgentRepliesScaling 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(agentRepliesQueue.id, appPrincipalId, roles.serviceBusDataOwner)
  scope: agentRepliesQueue
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataOwner)
  }
}

resource appAlertsSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(operatorAlertsQueue.id, appPrincipalId, roles.serviceBusDataSender)
  scope: operatorAlertsQueue
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
  }
}

resource agentRequestsReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(agentRequestsQueue.id, agentPrincipalId, roles.serviceBusDataReceiver)
  scope: agentRequestsQueue
  properties: {
    principalId: agentPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
  }
}

resource agentRepliesSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(agentRepliesQueue.id, agentPrincipalId, roles.serviceBusDataSender)
  scope: agentRepliesQueue
  properties: {
    principalId: agentPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
  }
}

// One module per submitting app: the Function App's Sender on that status queue and, once the
// submitting app's identity is known, its Receiver on its own status queue (its only role).
module submitters 'submitter-rbac.bicep' = [for app in submittingApps: {
  name: 'rbac-submitter-${app.name}'
  params: {
    serviceBusName: serviceBusName
    statusQueueName: 'status-${app.name}'
    appPrincipalId: appPrincipalId
    submitterPrincipalId: app.principalId
  }
}]

// --- Cosmos DB data plane, scoped to the app's database ---------------------------------------

resource cosmosAccount 'Microsoft.DocumentDB/databaseAccounts@2024-05-15' existing = {
  name: cosmosAccountName
}

resource appCosmosData 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = {
  parent: cosmosAccount
  name: guid(cosmosAccount.id, appPrincipalId, cosmosDataContributor)
  properties: {
    principalId: appPrincipalId
    roleDefinitionId: '${cosmosAccount.id}/sqlRoleDefinitions/${cosmosDataContributor}'
    scope: '${cosmosAccount.id}/dbs/${cosmosDatabaseName}'
  }
}

// --- Container registry: the agent pulls its own image ---------------------------------------

resource registry 'Microsoft.ContainerRegistry/registries@2023-07-01' existing = {
  name: registryName
}

resource agentPull 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(registry.id, agentPrincipalId, roles.acrPull)
  scope: registry
  properties: {
    principalId: agentPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.acrPull)
  }
}

// The simulator (deploySimulator) pulls its own image; nothing else.
resource simulatorPull 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(simulatorPrincipalId)) {
  name: guid(registry.id, simulatorPrincipalId, roles.acrPull)
  scope: registry
  properties: {
    principalId: simulatorPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.acrPull)
  }
}
