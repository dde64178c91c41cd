// The Durable Task Scheduler backend (durableBackend 'durableTaskScheduler', main.bicep): a
// scheduler, one task hub, and the Function App's identity as Durable Task Data Contributor on that
// task hub. The scheduler accepts identity-based access only: the app connects with
// Endpoint=...;Authentication=ManagedIdentity;ClientID=<its identity> (functionapp.bicep).
//
// ipAllowlist: an empty list denies all traffic (the app's gRPC calls get 403 even with the role),
// and a Flex Consumption app without a virtual network has no fixed outbound address, so the only
// list that admits it is 0.0.0.0/0; access is still Entra ID only. With networkIsolation the
// scheduler's public network access is off and the app reaches it through its private endpoint
// (private-endpoints.bicep); the list stays 0.0.0.0/0 so it never filters that traffic. The
// scheduler takes no virtual network rules (ipAllowlist and publicNetworkAccess are its only network
// properties: https://learn.microsoft.com/azure/templates/microsoft.durabletask/schedulers); a NAT
// gateway on the app subnet would give the app one address to list (docs/deploying.md).
// API 2026-02-01: the version with publicNetworkAccess and private endpoint connections.

@description('Name of the scheduler (3-64 letters, digits and hyphens).')
param name string

@description('Name of the task hub; the app uses it as its hub name (functionapp.bicep).')
param taskHubName string

@description('Azure region of the scheduler.')
param location string

@description('Tags applied to the scheduler.')
param tags object

@description('SKU: Consumption (billed per action) or Dedicated (capacity units).')
@allowed([
  'Consumption'
  'Dedicated'
])
param skuName string

@description('Capacity units of a Dedicated scheduler (ignored for Consumption).')
@minValue(1)
@maxValue(3)
param capacity int

@description('Addresses (IPv4, IPv6 or CIDR) admitted to the scheduler; never empty (that denies all).')
param ipAllowlist array

@description('Enabled, or Disabled with networkIsolation (private endpoint only).')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string

@description('Principal ID of the Function App identity.')
param appPrincipalId string

@description('Resource ID of the Log Analytics workspace the diagnostic settings send to (monitoring.bicep).')
param logAnalyticsId string

// Durable Task Data Contributor: the role Durable Functions apps need (start, run, query and purge
// orchestrations); Durable Task Worker lacks the client operations the front end uses.
var durableTaskDataContributor = '0ad04412-c4d5-4796-b79c-f76d14c8d402'
var dedicatedSku = {
  name: 'Dedicated'
  capacity: capacity
}
var consumptionSku = {
  name: 'Consumption'
}

resource scheduler 'Microsoft.DurableTask/schedulers@2026-02-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    sku: (skuName == 'Dedicated') ? dedicatedSku : consumptionSku
    ipAllowlist: ipAllowlist
    publicNetworkAccess: publicNetworkAccess
  }
}

resource taskHub 'Microsoft.DurableTask/schedulers/taskHubs@2026-02-01' = {
  parent: scheduler
  name: taskHubName
}

resource appTaskHub 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(taskHub.id, appPrincipalId, durableTaskDataContributor)
  scope: taskHub
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', durableTaskDataContributor)
  }
}

// The scheduler's resource logs (category "Durable Task Scheduler Logs", table
// DurableTaskSchedulerLogs) in the workspace: Azure Monitor's "Supported logs for
// Microsoft.DurableTask/schedulers",
// https://learn.microsoft.com/azure/azure-monitor/reference/supported-logs/microsoft-durabletask-schedulers-logs
// (docs/operating.md "Audit logs").
resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: scheduler
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

output id string = scheduler.id
output name string = scheduler.name
output endpoint string = scheduler.properties.endpoint
output taskHubName string = taskHub.name
