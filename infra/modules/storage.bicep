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
      defaultAction: (publicNetworkAccess == 'Disabled') ? 'Deny' : 'Allow'
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

resource storageTables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [for table in tables: {
  parent: tableService
  name: table
}]

output id string = storage.id
output name string = storage.name
output blobEndpoint string = storage.properties.primaryEndpoints.blob
output tableEndpoint string = storage.properties.primaryEndpoints.table
output queueEndpoint string = storage.properties.primaryEndpoints.queue
