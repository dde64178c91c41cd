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

resource server 'Microsoft.Sql/servers@2023-08-01' = {
  name: serverName
  location: location
  tags: tags
  properties: {
    minimalTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
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

// 0.0.0.0 is the documented "allow Azure services" rule: the Flex Consumption app has no fixed
// outbound address without a virtual network. Authentication is still Entra-only.
resource allowAzureServices 'Microsoft.Sql/servers/firewallRules@2023-08-01' = {
  parent: server
  name: 'AllowAllWindowsAzureIps'
  properties: {
    startIpAddress: '0.0.0.0'
    endIpAddress: '0.0.0.0'
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

output serverName string = server.name
output serverFqdn string = server.properties.fullyQualifiedDomainName
output databaseName string = database.name
