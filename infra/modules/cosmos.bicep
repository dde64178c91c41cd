// Cosmos DB (NoSQL API, serverless) holding the state records. Keys are disabled
// (disableLocalAuth): the app reads and writes with its managed identity and the built-in Data
// Contributor data-plane role (rbac.bicep).

@description('Name of the Cosmos DB account.')
param name string

@description('Azure region of the account.')
param location string

@description('Tags applied to the account.')
param tags object

@description('Name of the SQL (NoSQL API) database.')
param databaseName string

@description('Container of the state records; partition key /OrderID (E3, E13).')
param containerName string

@description('Container of the Supervisor recovery index (E14); partition key /Bucket.')
param recoveryContainerName string

@description('Enabled, or Disabled with networkIsolation (main.bicep): reachable through private endpoints only.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string = 'Enabled'

@description('Resource ID of the Log Analytics workspace the diagnostic settings send to (monitoring.bicep).')
param logAnalyticsId string

@description('Subnets admitted while public network access is on (the Function App\'s, network.bicep); each carries the Microsoft.AzureCosmosDB service endpoint.')
param allowedSubnetIds array

@description('Public IPv4 addresses admitted while public network access is on (the operator\'s, for `ops --azd`); empty: none.')
param allowedIpAddresses array = []

// With public access on, the account admits only these subnets and addresses: the virtual network
// filter is on, and no rule is 0.0.0.0 (which would admit every Azure datacenter). The Azure
// portal's Data Explorer is refused too unless its addresses are added. Sources: "Configure access
// from virtual networks" and "Configure IP firewall" for Azure Cosmos DB,
// https://learn.microsoft.com/azure/cosmos-db/how-to-configure-vnet-service-endpoint,
// https://learn.microsoft.com/azure/cosmos-db/how-to-configure-firewall.
var filtered = publicNetworkAccess == 'Enabled'
var subnetRules = [for id in allowedSubnetIds: {
  id: id
  ignoreMissingVNetServiceEndpoint: false
}]
var ipRules = [for address in allowedIpAddresses: {
  ipAddressOrRange: address
}]

resource account 'Microsoft.DocumentDB/databaseAccounts@2024-05-15' = {
  name: name
  location: location
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    consistencyPolicy: {
      defaultConsistencyLevel: 'Session'
    }
    locations: [
      {
        locationName: location
        failoverPriority: 0
        isZoneRedundant: false
      }
    ]
    capabilities: [
      {
        name: 'EnableServerless'
      }
    ]
    disableLocalAuth: true
    disableKeyBasedMetadataWriteAccess: true
    minimalTlsVersion: 'Tls12'
    publicNetworkAccess: publicNetworkAccess
    isVirtualNetworkFilterEnabled: filtered
    virtualNetworkRules: filtered ? subnetRules : []
    ipRules: filtered ? ipRules : []
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2024-05-15' = {
  parent: account
  name: databaseName
  properties: {
    resource: {
      id: databaseName
    }
  }
}

// Composite indexes for the two scans that filter on ProcessState and sort on another property:
// the Supervisor's  WHERE c.CompleteBy >= @windowStart AND c.CompleteBy < @now AND (c.ProcessState
// = 'Processing' OR c.ProcessState = 'Compensating') ORDER BY c.CompleteBy  (E13), the starter's
// claim  WHERE c.ProcessState = 'Pending' AND IS_NULL(c.LockedBy) AND (...) ORDER BY c.CreatedAt
// (E4), and the operator's  WHERE c.ProcessState = @state ORDER BY c.OrderID.
resource stateContainer 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-05-15' = {
  parent: database
  name: containerName
  properties: {
    resource: {
      id: containerName
      partitionKey: {
        paths: [
          '/OrderID'
        ]
        kind: 'Hash'
        version: 2
      }
      indexingPolicy: {
        indexingMode: 'consistent'
        automatic: true
        includedPaths: [
          {
            path: '/*'
          }
        ]
        excludedPaths: [
          {
            path: '/"_etag"/?'
          }
        ]
        compositeIndexes: [
          [
            {
              path: '/ProcessState'
              order: 'ascending'
            }
            {
              path: '/CompleteBy'
              order: 'ascending'
            }
          ]
          [
            {
              path: '/ProcessState'
              order: 'ascending'
            }
            {
              path: '/CreatedAt'
              order: 'ascending'
            }
          ]
          [
            {
              path: '/ProcessState'
              order: 'ascending'
            }
            {
              path: '/OrderID'
              order: 'ascending'
            }
          ]
        ]
      }
    }
  }
}

// The recovery index (E14), partitioned by time bucket so the Supervisor reads one partition per
// window. Default indexing until its queries settle.
resource recoveryContainer 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2024-05-15' = {
  parent: database
  name: recoveryContainerName
  properties: {
    resource: {
      id: recoveryContainerName
      partitionKey: {
        paths: [
          '/Bucket'
        ]
        kind: 'Hash'
        version: 2
      }
    }
  }
}

// The data-plane audit trail (allLogs: DataPlaneRequests, ControlPlaneRequests, ...), in the workspace
// (docs/operating.md "Audit logs").
resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: account
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

output id string = account.id
output name string = account.name
output endpoint string = account.properties.documentEndpoint
output databaseName string = database.name
output containerName string = stateContainer.name
output recoveryContainerName string = recoveryContainer.name
