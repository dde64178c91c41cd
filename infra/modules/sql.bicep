// Azure SQL for the orders database, Entra-only: SQL authentication is off, no SQL login exists,
// and the Entra administrator is the deploying principal. The post-provision script
// (scripts/postprovision.sh) signs in as that principal to create the schema and the Function
// App's database user FROM EXTERNAL PROVIDER.

@description('Name of the logical SQL server.')
param serverName string

@description('Name of the orders database.')
param databaseName string

@description('Azure region of the server and database.')
param location string

@description('Tags applied to the server and database.')
param tags object

@description('Object ID of the Entra principal that administers the server (the deployer).')
param adminPrincipalId string

@description('Display name or UPN shown for the Entra administrator.')
param adminLogin string

@description('Kind of the Entra administrator: User, Group or Application.')
@allowed([
  'User'
  'Group'
  'Application'
])
param adminPrincipalType string

@description('Minutes of inactivity before the serverless database pauses (-1 never pauses).')
param autoPauseDelayMinutes int = 60

@description('Enabled, or Disabled with networkIsolation (main.bicep): reachable through private endpoints only.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string = 'Enabled'

@description('Resource ID of the Function App\'s subnet (network.bicep), admitted while public network access is on.')
param appSubnetId string

@description('Resource ID of the Log Analytics workspace the diagnostic settings send to (monitoring.bicep).')
param logAnalyticsId string

resource server 'Microsoft.Sql/servers@2023-08-01' = {
  name: serverName
  location: location
  tags: tags
  properties: {
    minimalTlsVersion: '1.2'
    publicNetworkAccess: publicNetworkAccess
    version: '12.0'
    administrators: {
      administratorType: 'ActiveDirectory'
      azureADOnlyAuthentication: true
      login: adminLogin
      principalType: adminPrincipalType
      sid: adminPrincipalId
      tenantId: tenant().tenantId
    }
  }
}

resource entraOnly 'Microsoft.Sql/servers/azureADOnlyAuthentications@2023-08-01' = {
  parent: server
  name: 'Default'
  properties: {
    azureADOnlyAuthentication: true
  }
}

// No "allow Azure services" rule (0.0.0.0): it admits every Azure customer's resources. The
// Function App's subnet carries the Microsoft.Sql service endpoint (network.bicep) and is the one
// network admitted while public access is on; with networkIsolation public access is off and the
// app uses the private endpoint. The post-provision script opens the server to the deployer's
// address for its run only (docs/deploying.md "Private network").
resource appSubnetRule 'Microsoft.Sql/servers/virtualNetworkRules@2023-08-01' = if (publicNetworkAccess == 'Enabled') {
  parent: server
  name: 'function-app-subnet'
  properties: {
    virtualNetworkSubnetId: appSubnetId
    ignoreMissingVnetServiceEndpoint: false
  }
}

// Serverless General Purpose: 0.5-1 vCore, pauses when idle, billed per second while running.
resource database 'Microsoft.Sql/servers/databases@2023-08-01' = {
  parent: server
  name: databaseName
  location: location
  tags: tags
  sku: {
    name: 'GP_S_Gen5'
    tier: 'GeneralPurpose'
    family: 'Gen5'
    capacity: 1
  }
  properties: {
    autoPauseDelay: autoPauseDelayMinutes
    minCapacity: json('0.5')
    requestedBackupStorageRedundancy: 'Local'
    zoneRedundant: false
  }
}

resource backupRetention 'Microsoft.Sql/servers/databases/backupShortTermRetentionPolicies@2023-08-01' = {
  parent: database
  name: 'default'
  properties: {
    retentionDays: 7
  }
}

// SQL auditing to Azure Monitor (the server's audit events go to the master database's
// diagnostic setting, category SQLSecurityAuditEvents): every login and statement against the
// orders database, with the Entra principal, in the workspace (docs/operating.md "Audit logs").
resource auditing 'Microsoft.Sql/servers/auditingSettings@2023-08-01' = {
  parent: server
  name: 'default'
  properties: {
    state: 'Enabled'
    isAzureMonitorTargetEnabled: true
    auditActionsAndGroups: [
      'SUCCESSFUL_DATABASE_AUTHENTICATION_GROUP'
      'FAILED_DATABASE_AUTHENTICATION_GROUP'
      'BATCH_COMPLETED_GROUP'
    ]
  }
}

resource master 'Microsoft.Sql/servers/databases@2023-08-01' existing = {
  parent: server
  name: 'master'
}

// Where the server's audit events land.
resource auditDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: master
  properties: {
    workspaceId: logAnalyticsId
    logs: [
      {
        category: 'SQLSecurityAuditEvents'
        enabled: true
      }
    ]
  }
}

// The orders database's own logs (allLogs: errors, timeouts, blocks, deadlocks, ...).
resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: database
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

output serverId string = server.id
output serverName string = server.name
output serverFqdn string = server.properties.fullyQualifiedDomainName
output databaseName string = database.name
