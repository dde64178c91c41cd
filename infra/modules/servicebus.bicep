// The Service Bus namespace and every queue the app and the agent use. Local (SAS key)
// authentication is off: senders and receivers authenticate with Entra ID, and each identity gets
// queue-scoped roles (rbac.bicep).
//
// The queues and their properties mirror harness/emulators/servicebus-config/Config.json (the Service Bus emulator's
// configuration for `func start`); the offline checks compare the two. Two properties differ on
// purpose, because the emulator refuses to start with Azure's values: Config.json holds the
// emulator's maximum where the value here is beyond it (harness/tools/iac/emulator.py EMULATOR_CLAMPED):
// defaultMessageTimeToLive at most PT1H and duplicateDetectionHistoryTimeWindow at most PT5M
// (https://github.com/Azure/azure-service-bus-emulator-installer/blob/main/ServiceBus-Emulator/Schema/Config-schema.json).
// Every other property is the same in both.
// - Duplicate detection for 10 minutes (5 in the emulator): every sender sets a stable MessageId
//   (the order ID, the request ID, "<order>:<status>"), so a retried send inside the retry budget
//   is dropped.
// - agent-requests MaxDeliveryCount 2 must equal SAS_AGENT_REQUEST_MAX_DELIVERIES (functionapp.bicep).
// - orders MaxDeliveryCount 5 must equal SAS_ORDERS_MAX_DELIVERIES: on the last delivery the app
//   dead-letters a failing submission itself, with the error and an operator alert.

@description('Name of the Service Bus namespace.')
param name string

@description('Azure region of the namespace.')
param location string

@description('Tags applied to the namespace.')
param tags object

@description('Submitting applications: [{ name, clientId, principalId }]. Each gets its own status queue "status-<name>".')
param submittingApps array

@description('Premium (one messaging unit) instead of Standard: private endpoints need Premium (networkIsolation).')
param premium bool = false

@description('Enabled, or Disabled with networkIsolation (main.bicep): reachable through private endpoints only.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string = 'Enabled'

@description('Resource ID of the Log Analytics workspace the diagnostic settings send to (monitoring.bicep).')
param logAnalyticsId string

// Standard is the smallest tier with duplicate detection; Premium the only one with private endpoints.
var standardSku = {
  name: 'Standard'
  tier: 'Standard'
}
var premiumSku = {
  name: 'Premium'
  tier: 'Premium'
  capacity: 1
}

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: name
  location: location
  tags: tags
  sku: premium ? premiumSku : standardSku
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: publicNetworkAccess
  }
}

resource ordersQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: 'orders'
  properties: {
    maxDeliveryCount: 5
    lockDuration: 'PT1M'
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    deadLetteringOnMessageExpiration: true
    defaultMessageTimeToLive: 'P1D'
    requiresSession: false
  }
}

resource agentRequestsQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: 'agent-requests'
  properties: {
    maxDeliveryCount: 2
    lockDuration: 'PT1M'
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    deadLetteringOnMessageExpiration: true
    defaultMessageTimeToLive: 'PT1H'
    requiresSession: false
  }
}

resource agentRepliesQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: 'agent-replies'
  properties: {
    maxDeliveryCount: 5
    lockDuration: 'PT1M'
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    deadLetteringOnMessageExpiration: true
    defaultMessageTimeToLive: 'PT1H'
    requiresSession: false
  }
}

// Alerts wait 14 days for an operator; one still unread then moves to the dead-letter queue (and
// the dead-letter alert fires) rather than vanishing.
resource operatorAlertsQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: 'operator-alerts'
  properties: {
    maxDeliveryCount: 10
    lockDuration: 'PT1M'
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    deadLetteringOnMessageExpiration: true
    defaultMessageTimeToLive: 'P14D'
    requiresSession: false
  }
}

// One private status queue per submitting application (E16).
resource statusQueues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = [for app in submittingApps: {
  parent: namespace
  name: 'status-${app.name}'
  properties: {
    maxDeliveryCount: 10
    lockDuration: 'PT1M'
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    deadLetteringOnMessageExpiration: true
    defaultMessageTimeToLive: 'P7D'
    requiresSession: false
  }
}]

// The data-plane audit trail (allLogs: OperationalLogs, RuntimeAuditLogs, ...): every send, receive and
// settlement with the caller's identity, in the workspace (docs/operating.md "Audit logs").
resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: namespace
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

output id string = namespace.id
output name string = namespace.name
// serviceBusEndpoint is https://<name>.servicebus.windows.net:443/ (or a sovereign cloud's suffix).
output fullyQualifiedNamespace string = replace(replace(namespace.properties.serviceBusEndpoint, 'https://', ''), ':443/', '')
output ordersQueueName string = ordersQueue.name
// Admission control reads this queue's countDetails over ARM (SAS_ORDERS_QUEUE_RESOURCE_ID).
output ordersQueueId string = ordersQueue.id
output agentRequestsQueueName string = agentRequestsQueue.name
output agentRepliesQueueName string = agentRepliesQueue.name
output operatorAlertsQueueName string = operatorAlertsQueue.name
// The app's settings take these from the queues, so they cannot drift apart.
output ordersMaxDeliveryCount int = ordersQueue.properties.maxDeliveryCount
output agentRequestsMaxDeliveryCount int = agentRequestsQueue.properties.maxDeliveryCount
