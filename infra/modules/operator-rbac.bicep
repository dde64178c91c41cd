// The deploying principal's data-plane roles for `python -m ops` against Azure, on a first
// deployment (main.bicep grantDeployerOperatorRoles). Each is the least role the command needs,
// scoped to the one entity it touches; python -m harness.tools.iac allows exactly these
// (harness/tools/iac/first_deployment.py, policy.OPERATOR_ROLES). The orders database needs nothing here:
// the deployer is the SQL server's Entra administrator (sql.bicep). `ops resubmit` and
// `ops compensate` write state records, which needs Cosmos DB Built-in Data Contributor: not
// granted here (docs/operating.md).
//
// | command                                        | resource                       | role                                |
// |------------------------------------------------|--------------------------------|-------------------------------------|
// | ops status, show, list, watch                  | Cosmos DB database (data plane)| Cosmos DB Built-in Data Reader      |
// | ops show (the compensation log)                | table compensationlog          | Storage Table Data Reader           |
// | ops alerts, alerts ack / drain, show           | queue operator-alerts          | Azure Service Bus Data Receiver     |
// | ops dlq list / resubmit <queue>                | queues orders, agent-requests, agent-replies | Data Receiver (peek, take the dead letter) + Data Sender (send it back) |
// | ops smoke --app <sample app>, ops show         | queue status-<sample app> (main.bicep sampleApp) | Azure Service Bus Data Receiver (peek only: the app's own receiver still gets them) |
// | ops instances (Azure Storage backend)          | table <hub>Instances (host storage) | Storage Table Data Reader     |
// | ops replay export (Azure Storage backend)      | tables <hub>Instances, <hub>History | Storage Table Data Reader     |

@description('Object ID of the deploying principal (azd principalId).')
param operatorPrincipalId string

@description('User, or ServicePrincipal when a pipeline deploys.')
param operatorPrincipalType string

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

@description('The sample submitting app\'s status queue (status-<name>), which `ops smoke` peeks; empty with main.bicep sampleApp off: no sample app, and no role.')
param statusQueueName string

@description('Name of the Cosmos DB account.')
param cosmosAccountName string

@description('Name of the Cosmos DB database of the state records.')
param cosmosDatabaseName string

@description('Name of the storage account holding the compensation log.')
param dataStorageName string

@description('Name of the compensation log table.')
param compensationLogTableName string

@description('Name of the Functions host storage account, which holds the task hub (Azure Storage backend).')
param hostStorageName string

@description('The task hub\'s instance table (<hub>Instances), which `ops instances` reads; empty on the Durable Task Scheduler, whose task hub is not in storage.')
param taskHubInstancesTableName string

@description('The task hub\'s history table (<hub>History), which `ops replay export` reads; empty on the Durable Task Scheduler.')
param taskHubHistoryTableName string

var serviceBusDataSender = '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
var serviceBusDataReceiver = '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
var storageTableDataReader = '76199698-9eea-4c19-bc75-cec21354c6b6'
// Cosmos DB Built-in Data Reader: a data-plane role definition of the account.
var cosmosDataReader = '00000000-0000-0000-0000-000000000001'

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

resource statusQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: namespace
  name: statusQueueName
}

// ops alerts (peek), ops alerts ack|drain (receive and complete), ops show (an order's alerts).
resource alertsReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(operatorAlertsQueue.id, operatorPrincipalId, serviceBusDataReceiver)
  scope: operatorAlertsQueue
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
  }
}

// ops dlq list orders (peek its dead letters), ops dlq resubmit orders (take one).
resource ordersReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(ordersQueue.id, operatorPrincipalId, serviceBusDataReceiver)
  scope: ordersQueue
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
  }
}

// ops dlq resubmit orders: sends the dead letter back to the queue.
resource ordersSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(ordersQueue.id, operatorPrincipalId, serviceBusDataSender)
  scope: ordersQueue
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
  }
}

// ops dlq list|resubmit agent-requests.
resource agentRequestsReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(agentRequestsQueue.id, operatorPrincipalId, serviceBusDataReceiver)
  scope: agentRequestsQueue
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
  }
}

// ops dlq resubmit agent-requests.
resource agentRequestsSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(agentRequestsQueue.id, operatorPrincipalId, serviceBusDataSender)
  scope: agentRequestsQueue
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
  }
}

// ops dlq list|resubmit agent-replies.
resource agentRepliesReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(agentRepliesQueue.id, operatorPrincipalId, serviceBusDataReceiver)
  scope: agentRepliesQueue
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
  }
}

// ops dlq resubmit agent-replies.
resource agentRepliesSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(agentRepliesQueue.id, operatorPrincipalId, serviceBusDataSender)
  scope: agentRepliesQueue
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
  }
}

// ops smoke --app <sample app>: peeks the sample app's status queue for the order's final status
// (a peek takes no message from the app, still the queue's only consumer); ops show likewise.
resource statusReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(statusQueueName)) {
  name: guid(statusQueue.id, operatorPrincipalId, serviceBusDataReceiver)
  scope: statusQueue
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
  }
}

// --- the compensation log: ops show reads an order's entries ------------------------------------

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

resource compensationLogReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(compensationLogTable.id, operatorPrincipalId, storageTableDataReader)
  scope: compensationLogTable
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataReader)
  }
}

// --- Cosmos DB: ops status, show, list and watch read state records -----------------------------

resource cosmosAccount 'Microsoft.DocumentDB/databaseAccounts@2024-05-15' existing = {
  name: cosmosAccountName
}

resource stateReader 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-05-15' = {
  parent: cosmosAccount
  name: guid(cosmosAccount.id, operatorPrincipalId, cosmosDataReader)
  properties: {
    principalId: operatorPrincipalId
    roleDefinitionId: '${cosmosAccount.id}/sqlRoleDefinitions/${cosmosDataReader}'
    scope: '${cosmosAccount.id}/dbs/${cosmosDatabaseName}'
  }
}

// --- the task hub (Azure Storage backend): ops instances reads its Instances table -------------

resource hostStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: hostStorageName
}

resource hostTableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' existing = {
  parent: hostStorage
  name: 'default'
}

// The table main.bicep declares in the host storage account (the Durable extension would make it
// on its first start, after this deployment): the narrowest scope Azure RBAC has for it. The
// account's table service would also expose the History table (orchestration inputs and outputs).
resource taskHubInstancesTable 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' existing = {
  parent: hostTableService
  name: taskHubInstancesTableName
}

resource taskHubInstancesReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(taskHubInstancesTableName)) {
  name: guid(taskHubInstancesTable.id, operatorPrincipalId, storageTableDataReader)
  scope: taskHubInstancesTable
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataReader)
  }
}

// ops replay export: every instance's history, to replay through the code about to be deployed
// (ops/replay.py). Declared by main.bicep like the Instances table, for the same reason.
resource taskHubHistoryTable 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' existing = {
  parent: hostTableService
  name: taskHubHistoryTableName
}

resource taskHubHistoryReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(taskHubHistoryTableName)) {
  name: guid(taskHubHistoryTable.id, operatorPrincipalId, storageTableDataReader)
  scope: taskHubHistoryTable
  properties: {
    principalId: operatorPrincipalId
    principalType: operatorPrincipalType
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageTableDataReader)
  }
}
