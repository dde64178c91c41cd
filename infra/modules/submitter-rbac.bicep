// The roles around one submitting application's private status queue (E16): the Function App
// sends status messages to it, and the submitting app is its only receiver. That Receiver is the
// submitting app's only role anywhere: it submits orders over HTTP only (App Service
// Authentication, functionapp.bicep), and the Function App is the only sender to orders. A
// submitting app listed before its identity exists (empty principalId) gets its queue now and its
// role on the next provision. python -m harness.tools.iac checks all of this (harness/tools/iac/isolation.py).

@description('Name of the Service Bus namespace.')
param serviceBusName string

@description('Name of this submitting app status queue (status-<name>).')
param statusQueueName string

@description('Principal ID of the Function App identity.')
param appPrincipalId string

@description('Object ID of the submitting app service principal (or managed identity); empty for none yet.')
param submitterPrincipalId string

var serviceBusDataSender = '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
var serviceBusDataReceiver = '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusName
}

resource statusQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: namespace
  name: statusQueueName
}

resource appStatusSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(statusQueue.id, appPrincipalId, serviceBusDataSender)
  scope: statusQueue
  properties: {
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataSender)
  }
}

resource submitterStatusReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(submitterPrincipalId)) {
  name: guid(statusQueue.id, submitterPrincipalId, serviceBusDataReceiver)
  scope: statusQueue
  properties: {
    principalId: submitterPrincipalId
    principalType: 'ServicePrincipal'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', serviceBusDataReceiver)
  }
}
