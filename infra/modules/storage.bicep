// A storage account reachable only with Entra ID (no shared key, no SAS signed with the key, no
// anonymous blobs), with the blob containers and tables the app needs created up front.

@description('Name of the storage account (3-24 lower-case letters and digits).')
@minLength(3)
@maxLength(24)
param name string

@description('Azure region of the storage account.')
param location string

@description('Tags applied to the storage account.')
param tags object

@description('Blob containers to create.')
param containers array = []

@description('Tables to create.')
param tables array = []

@description('Days deleted blobs and containers stay recoverable.')
@minValue(1)
@maxValue(365)
param deleteRetentionDays int = 7

@description('Enabled, or Disabled with networkIsolation (main.bicep): reachable through private endpoints only.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string = 'Enabled'

@description('Resource ID of the Log Analytics workspace the diagnostic settings send to (monitoring.bicep).')
param logAnalyticsId string

@description('While public network access is on: true admits every network (the host account: main.bicep says why); false admits only allowedSubnetIds and allowedIpAddresses.')
param allowAllNetworks bool = false

@description('Subnets admitted while public network access is on (the Function App\'s, network.bicep); each carries the Microsoft.Storage service endpoint.')
param allowedSubnetIds array = []

@description('Public IPv4 addresses admitted while public network access is on (the operator\'s, for `ops --azd`); empty: none.')
param allowedIpAddresses array = []

// Network rules: "Configure Azure Storage firewalls and virtual networks",
// https://learn.microsoft.com/azure/storage/common/storage-network-security. An IP rule admits public
// addresses only and has no effect on requests from the account's own region, which is why the app
// is admitted by its subnet (service endpoint), not by an address.
var open = (publicNetworkAccess == 'Enabled') && allowAllNetworks
var subnetRules = [for id in allowedSubnetIds: {
  id: id
  action: 'Allow'
}]
var ipRules = [for address in allowedIpAddresses: {
  value: address
  action: 'Allow'
}]

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    allowCrossTenantReplication: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      bypass: 'AzureServices'
      defaultAction: open ? 'Allow' : 'Deny'
      virtualNetworkRules: (publicNetworkAccess == 'Enabled') ? subnetRules : []
      ipRules: (publicNetworkAccess == 'Enabled') ? ipRules : []
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: deleteRetentionDays
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: deleteRetentionDays
    }
  }
}

resource blobContainers 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = [for container in containers: {
  parent: blobService
  name: container
  properties: {
    publicAccess: 'None'
  }
}]

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

// Declared so the queue service's logs have a scope (the Durable task hub's queues live here).
resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource storageTables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [for table in tables: {
  parent: tableService
  name: table
}]

// Storage logs per service (the account itself has metrics only): StorageRead, StorageWrite and
// StorageDelete with the caller's identity, in the workspace (docs/operating.md "Audit logs").
resource blobDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: blobService
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

// The queue service's, likewise.
resource queueDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: queueService
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

// The table service's (the compensation log, the task hub's tables), likewise.
resource tableDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: tableService
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

output id string = storage.id
output name string = storage.name
output blobEndpoint string = storage.properties.primaryEndpoints.blob
output tableEndpoint string = storage.properties.primaryEndpoints.table
output queueEndpoint string = storage.properties.primaryEndpoints.queue
