// The Scheduler Agent Supervisor reference deployment (azd): one resource group holding the
// Function App (Flex Consumption), the Agent (Container Apps), Service Bus, Cosmos DB, Azure SQL,
// storage, monitoring and alerts. No keys anywhere: every connection uses a managed identity and
// every data service has local (key / SQL) authentication disabled.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; names the resource group and seeds every resource name.')
param environmentName string

@minLength(1)
@description('Azure region of every resource (one with Flex Consumption, e.g. eastus2, swedencentral).')
@metadata({
  azd: {
    type: 'location'
  }
})
param location string

@description('Object ID of the deploying principal (azd sets AZURE_PRINCIPAL_ID): the Entra administrator of the SQL server, used by the post-provision script.')
param principalId string

@description('Kind of the deploying principal: User, or ServicePrincipal when a pipeline deploys.')
@allowed([
  'User'
  'ServicePrincipal'
])
param principalType string = 'User'

@description('Name shown for the SQL Entra administrator (your UPN, or the pipeline service principal name).')
param principalName string = 'azd-deployer'

@description('Submitting applications (E16): [{ "name": "app-a", "clientId": "<its Entra application (client) ID>", "principalId": "<object ID of its service principal or managed identity, or empty>" }]. Each gets the private status queue status-<name>; its clientId goes into SAS_SUBMITTERS and the applications App Service Authentication admits (empty: not yet, it cannot call); with a principalId, the only Receiver role on its status queue and no other role. Apps submit over HTTP only. infra/README.md, "Register a submitting app".')
param submittingApps array

@description('Application (client) ID of the Entra app registration of the front end API (App ID URI api://<clientId>), created outside Bicep. Set: App Service Authentication admits only tokens issued for it to the submitting apps. Empty: none, and the app refuses every HTTP submission.')
param frontEndClientId string = ''

@description('Email address that receives operator alerts, dead-letter alerts and Supervisor errors; empty for none.')
param alertEmail string = ''

@description('First deployment: run the simulator (python -m simulator) as the remote service, a Container App with internal ingress in the agent\'s environment, and point the agent at it (agentRemoteUrl is then ignored). Off for production: docs/deploying.md "Production: the real remote service".')
param deploySimulator bool = false

@description('Base URL of the remote service the agent calls (AGENT_REMOTE_URL) when deploySimulator is off; required then.')
param agentRemoteUrl string = ''

@description('App ID URI of the real remote service\'s Entra registration, for which the agent presents its identity\'s token (AGENT_REMOTE_AUDIENCE) when deploySimulator is off; empty: no token.')
param agentRemoteAudience string = ''

@description('Client ID of the Entra registration that stands for the remote service (App ID URI api://<clientId>, created by the preprovision hook): the simulator admits only the agent identity\'s tokens for it. Empty: the simulator admits no call.')
param remoteClientId string = ''

@description('Simulator image; azd sets SERVICE_SIMULATOR_IMAGE_NAME after the first deploy. Empty: a placeholder image until then.')
param simulatorImageName string = ''

@description('First deployment: grant the deploying principal (principalId) the data-plane roles `python -m ops` needs to read orders, state and alerts and handle dead letters (modules/operator-rbac.bicep). Off for production, where operators get them through their own groups.')
param grantDeployerOperatorRoles bool = false

// The sample app is its own switch, not deploySimulator's: each removes a different first-deployment
// stand-in (a certificate on the deployer's machine that may submit orders; a fake remote service),
// and a staging environment pointed at the real remote service still wants `ops smoke` as the
// sample app. main.parameters.json defaults it to SAS_DEPLOY_SIMULATOR's value, so an environment
// that turns the simulator off for production leaves the sample app out unless it asks for it.
@description('First deployment: register the sample submitting app (sampleAppName, the preprovision hook\'s registration with a certificate made on the deployer\'s machine) as a submitting app, with its status queue and, with grantDeployerOperatorRoles, the deployer\'s peek on it for `ops smoke`. Off for production: no sample app in SAS_SUBMITTERS, no queue, no role.')
param sampleApp bool = false

@description('The sample submitting app\'s name (its status queue is status-<name>); not an entry of submittingApps: sampleApp adds it.')
param sampleAppName string = 'sample-app'

@description('Client ID of the sample app\'s registration (the preprovision hook sets SAS_SAMPLE_APP_CLIENT_ID); empty: not registered yet.')
param sampleAppClientId string = ''

@description('Object ID of the sample app\'s service principal (SAS_SAMPLE_APP_PRINCIPAL_ID): the Receiver on its status queue; empty: no role yet.')
param sampleAppPrincipalId string = ''

@description('Agent image; azd sets SERVICE_AGENT_IMAGE_NAME after the first deploy. Empty: a placeholder image until then.')
param agentImageName string = ''

@minValue(1)
@maxValue(256)
@description('Requests one agent replica works on at once (AGENT_CONCURRENCY).')
param agentConcurrency int = 8

@minValue(1)
@maxValue(10)
@description('Number of agent replicas.')
param agentReplicas int = 1

@description('Data classification tag of the order data; the compensation log storage gets the same tag and retention (C5).')
param dataClassification string = 'Confidential'

@minValue(40)
@maxValue(1000)
@description('Most instances the Function App scales out to.')
param functionMaximumInstanceCount int = 40

@allowed([
  2048
  4096
])
@description('Memory of each Function App instance in MB.')
param functionInstanceMemoryMB int = 2048

@description('Workflow version new orders run (SAS_WORKFLOW_VERSION, C7).')
@allowed([
  'v1'
  'v2'
])
param workflowVersion string = 'v1'

@description('NCRONTAB (six fields) of the Scheduler starter (SAS_STARTER_SCHEDULE).')
param starterSchedule string = '*/10 * * * * *'

@description('NCRONTAB (six fields) of the Supervisor (SAS_SUPERVISOR_SCHEDULE).')
param supervisorSchedule string = '*/30 * * * * *'

@minValue(15)
@maxValue(60)
@description('Seconds the Supervisor leader lease lasts; longer than the Supervisor cadence (SAS_LEADER_LEASE_SECONDS).')
param leaderLeaseSeconds int = 45

@description('Whether the Supervisor scans the recovery index container (SAS_RECOVERY_INDEX, E14).')
param recoveryIndexEnabled bool = false

@description('Minutes of inactivity before the serverless SQL database pauses (-1 never pauses).')
param sqlAutoPauseDelayMinutes int = 60

@minValue(30)
@maxValue(730)
@description('Days Log Analytics and Application Insights keep telemetry.')
param logRetentionInDays int = 30

@minValue(1)
@maxValue(365)
@description('Days deleted blobs and containers stay recoverable in both storage accounts.')
param storageDeleteRetentionDays int = 7

@description('Durable Functions storage provider: azureStorage (the host storage account, the default) or durableTaskScheduler (a Durable Task Scheduler and task hub; docs/deploying.md "Choosing the Durable backend").')
@allowed([
  'azureStorage'
  'durableTaskScheduler'
])
param durableBackend string = 'azureStorage'

@description('SKU of the Durable Task Scheduler (durableBackend durableTaskScheduler): Consumption (per action) or Dedicated (capacity units).')
@allowed([
  'Consumption'
  'Dedicated'
])
param durableTaskSchedulerSku string = 'Consumption'

@minValue(1)
@maxValue(3)
@description('Capacity units of a Dedicated Durable Task Scheduler.')
param durableTaskSchedulerCapacity int = 1

@description('Private network: the data services reachable only through private endpoints in the virtual network, public network access off, Service Bus raised to Premium (docs/deploying.md "Private network").')
param networkIsolation bool = false

@description('With networkIsolation off: the public IPv4 address of the operator\'s workstation, admitted by Cosmos DB and the compensation log\'s storage account beside the app\'s subnet, so `python -m ops --azd` reads them (the preprovision hook sets SAS_OPERATOR_IP to your address when grantDeployerOperatorRoles is on). Empty: the app\'s subnet alone.')
param operatorIpAddress string = ''

var abbrs = loadJsonContent('abbreviations.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = {
  'azd-env-name': environmentName
}
// C5: the compensation log is classified like the orders and state records it tracks.
var dataTags = union(tags, {
  'data-classification': dataClassification
})
var functionAppName = '${abbrs.webSitesFunctions}api-${resourceToken}'
var deploymentContainerName = 'app-package-${take(functionAppName, 32)}-${take(resourceToken, 7)}'
var compensationLogTableName = 'compensationlog'
var sqlAdminPrincipalType = principalType == 'ServicePrincipal' ? 'Application' : 'User'
// The apps the deployment registers: submittingApps, and the sample app first when sampleApp is on.
var sampleApps = sampleApp ? [
  {
    name: sampleAppName
    clientId: sampleAppClientId
    principalId: sampleAppPrincipalId
  }
] : []
var registeredApps = concat(sampleApps, submittingApps)

var useDurableTaskScheduler = durableBackend == 'durableTaskScheduler'
// The host.json hub name: the task hub of either backend (functionapp.bicep sets it for DTS).
var durableTaskHubName = 'SchedulerAgentSupervisor'
// The Azure Storage backend's instance table, which `ops instances` reads (operator-rbac.bicep).
var taskHubInstancesTableName = '${durableTaskHubName}Instances'
// Its history table, which `ops replay export` reads with it (operator-rbac.bicep).
var taskHubHistoryTableName = '${durableTaskHubName}History'
var publicNetworkAccess = networkIsolation ? 'Disabled' : 'Enabled'
// With networkIsolation off, the networks Cosmos DB and the compensation log admit: the Function
// App's subnet (its service endpoints, network.bicep) and the operator's address. The agent needs
// neither (it talks to Service Bus alone), so its subnet is not admitted.
var appSubnets = [
  network.outputs.appSubnetId
]
var operatorAddresses = empty(operatorIpAddress) ? [] : [
  operatorIpAddress
]
// Private endpoints of the data services with networkIsolation (network.bicep), and their zones.
var dataEndpoints = [
  {
    name: 'pe-host-blob-${resourceToken}'
    serviceId: hostStorage.outputs.id
    groupId: 'blob'
    zone: 'privatelink.blob.core.windows.net'
  }
  {
    name: 'pe-host-queue-${resourceToken}'
    serviceId: hostStorage.outputs.id
    groupId: 'queue'
    zone: 'privatelink.queue.core.windows.net'
  }
  {
    name: 'pe-host-table-${resourceToken}'
    serviceId: hostStorage.outputs.id
    groupId: 'table'
    zone: 'privatelink.table.core.windows.net'
  }
  {
    name: 'pe-log-table-${resourceToken}'
    serviceId: dataStorage.outputs.id
    groupId: 'table'
    zone: 'privatelink.table.core.windows.net'
  }
  {
    name: 'pe-cosmos-${resourceToken}'
    serviceId: cosmos.outputs.id
    groupId: 'Sql'
    zone: 'privatelink.documents.azure.com'
  }
  {
    name: 'pe-sql-${resourceToken}'
    serviceId: sql.outputs.serverId
    groupId: 'sqlServer'
    zone: 'privatelink.database.windows.net'
  }
  {
    name: 'pe-sb-${resourceToken}'
    serviceId: serviceBus.outputs.id
    groupId: 'namespace'
    zone: 'privatelink.servicebus.windows.net'
  }
]
var dtsEndpoints = [
  {
    name: 'pe-dts-${resourceToken}'
    serviceId: useDurableTaskScheduler ? durableTask.outputs.id : ''
    groupId: 'scheduler'
    zone: 'privatelink.durabletask.io'
  }
]
var privateEndpoints = concat(dataEndpoints, useDurableTaskScheduler ? dtsEndpoints : [])
var dataZones = [
  'privatelink.blob.core.windows.net'
  'privatelink.queue.core.windows.net'
  'privatelink.table.core.windows.net'
  'privatelink.documents.azure.com'
  'privatelink.database.windows.net'
  'privatelink.servicebus.windows.net'
]
var dtsZones = [
  'privatelink.durabletask.io'
]
var privateDnsZones = concat(dataZones, useDurableTaskScheduler ? dtsZones : [])

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: '${abbrs.resourcesResourceGroups}${environmentName}'
  location: location
  tags: tags
}

module appIdentity 'modules/identity.bicep' = {
  name: 'app-identity'
  scope: rg
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}api-${resourceToken}'
    location: location
    tags: tags
  }
}

module agentIdentity 'modules/identity.bicep' = {
  name: 'agent-identity'
  scope: rg
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}agent-${resourceToken}'
    location: location
    tags: tags
  }
}

module simulatorIdentity 'modules/identity.bicep' = if (deploySimulator) {
  name: 'simulator-identity'
  scope: rg
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}sim-${resourceToken}'
    location: location
    tags: tags
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    applicationInsightsName: '${abbrs.insightsComponents}${resourceToken}'
    location: location
    tags: tags
    retentionInDays: logRetentionInDays
  }
}

// The Functions host storage: AzureWebJobsStorage, the deployment package, the Durable task hub,
// timer locks and the Supervisor's leader lease (container "leases").
module hostStorage 'modules/storage.bicep' = {
  name: 'host-storage'
  scope: rg
  params: {
    logAnalyticsId: monitoring.outputs.logAnalyticsId
    name: '${abbrs.storageStorageAccounts}${resourceToken}'
    location: location
    tags: tags
    containers: [
      deploymentContainerName
      'leases'
    ]
    // Declared, not left to the Durable extension (which creates its tables if they do not exist,
    // and finds this one made): a role assignment's scope must exist when it is deployed, and
    // the deployer's Storage Table Data Reader for `ops instances` is scoped to this table alone.
    tables: useDurableTaskScheduler ? [] : [
      taskHubInstancesTableName
      taskHubHistoryTableName
    ]
    deleteRetentionDays: storageDeleteRetentionDays
    publicNetworkAccess: publicNetworkAccess
    // Open to every network while public access is on: on Flex Consumption the deployment package
    // is written to this account by the platform from outside the app's subnet, so a firewall that
    // admits only the subnet refuses `azd deploy` (docs/deploying.md "Private network").
    // networkIsolation closes it (private endpoints). Shared keys are off: Entra ID only.
    allowAllNetworks: true
  }
}

// The compensation log (C5): its own account, tagged like the order data it tracks.
module dataStorage 'modules/storage.bicep' = {
  name: 'data-storage'
  scope: rg
  params: {
    logAnalyticsId: monitoring.outputs.logAnalyticsId
    name: '${abbrs.storageStorageAccounts}log${resourceToken}'
    location: location
    tags: dataTags
    containers: []
    tables: [
      compensationLogTableName
    ]
    deleteRetentionDays: storageDeleteRetentionDays
    publicNetworkAccess: publicNetworkAccess
    allowAllNetworks: false
    allowedSubnetIds: appSubnets
    allowedIpAddresses: operatorAddresses
  }
}

module serviceBus 'modules/servicebus.bicep' = {
  name: 'servicebus'
  scope: rg
  params: {
    logAnalyticsId: monitoring.outputs.logAnalyticsId
    name: '${abbrs.serviceBusNamespaces}${resourceToken}'
    location: location
    tags: tags
    submittingApps: registeredApps
    // Private endpoints need Premium (docs/deploying.md "Private network" for its cost).
    premium: networkIsolation
    publicNetworkAccess: publicNetworkAccess
  }
}

module cosmos 'modules/cosmos.bicep' = {
  name: 'cosmos'
  scope: rg
  params: {
    logAnalyticsId: monitoring.outputs.logAnalyticsId
    name: '${abbrs.documentDBDatabaseAccounts}${resourceToken}'
    location: location
    tags: dataTags
    databaseName: 'sas'
    containerName: 'orderState'
    recoveryContainerName: 'recoveryIndex'
    publicNetworkAccess: publicNetworkAccess
    allowedSubnetIds: appSubnets
    allowedIpAddresses: operatorAddresses
  }
}

module sql 'modules/sql.bicep' = {
  name: 'sql'
  scope: rg
  params: {
    logAnalyticsId: monitoring.outputs.logAnalyticsId
    serverName: '${abbrs.sqlServers}${resourceToken}'
    databaseName: 'orders'
    location: location
    tags: dataTags
    adminPrincipalId: principalId
    adminLogin: principalName
    adminPrincipalType: sqlAdminPrincipalType
    autoPauseDelayMinutes: sqlAutoPauseDelayMinutes
    publicNetworkAccess: publicNetworkAccess
    appSubnetId: network.outputs.appSubnetId
  }
}

module registry 'modules/registry.bicep' = {
  name: 'registry'
  scope: rg
  params: {
    name: '${abbrs.containerRegistryRegistries}${resourceToken}'
    location: location
    tags: tags
  }
}

// The Function App's virtual network (both modes; network.bicep says why) and, with
// networkIsolation, the data services' private DNS zones and private endpoints.
module network 'modules/network.bicep' = {
  name: 'network'
  scope: rg
  params: {
    name: '${abbrs.networkVirtualNetworks}${resourceToken}'
    location: location
    tags: tags
    isolated: networkIsolation
    privateDnsZones: networkIsolation ? privateDnsZones : []
  }
}

module privateEndpointsModule 'modules/private-endpoints.bicep' = if (networkIsolation) {
  name: 'private-endpoints'
  scope: rg
  params: {
    location: location
    tags: tags
    subnetId: network.outputs.endpointsSubnetId
    privateEndpoints: privateEndpoints
  }
}

// The Durable Task Scheduler backend (durableBackend), with the app's role on its task hub.
module durableTask 'modules/dts.bicep' = if (useDurableTaskScheduler) {
  name: 'durable-task-scheduler'
  scope: rg
  params: {
    name: 'dts-${resourceToken}'
    taskHubName: durableTaskHubName
    location: location
    tags: tags
    skuName: durableTaskSchedulerSku
    capacity: durableTaskSchedulerCapacity
    // Never empty: that denies every caller (dts.bicep).
    ipAllowlist: [
      '0.0.0.0/0'
    ]
    publicNetworkAccess: publicNetworkAccess
    appPrincipalId: appIdentity.outputs.principalId
    logAnalyticsId: monitoring.outputs.logAnalyticsId
  }
}

module rbac 'modules/rbac.bicep' = {
  name: 'rbac'
  scope: rg
  params: {
    appPrincipalId: appIdentity.outputs.principalId
    agentPrincipalId: agentIdentity.outputs.principalId
    submittingApps: registeredApps
    hostStorageName: hostStorage.outputs.name
    dataStorageName: dataStorage.outputs.name
    compensationLogTableName: compensationLogTableName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    serviceBusName: serviceBus.outputs.name
    ordersQueueName: serviceBus.outputs.ordersQueueName
    agentRequestsQueueName: serviceBus.outputs.agentRequestsQueueName
    agentRepliesQueueName: serviceBus.outputs.agentRepliesQueueName
    operatorAlertsQueueName: serviceBus.outputs.operatorAlertsQueueName
    cosmosAccountName: cosmos.outputs.name
    cosmosDatabaseName: cosmos.outputs.databaseName
    registryName: registry.outputs.name
    simulatorPrincipalId: deploySimulator ? simulatorIdentity.outputs.principalId : ''
  }
}

// What `python -m ops` needs, for the deployer, on a first deployment (grantDeployerOperatorRoles).
module operatorRbac 'modules/operator-rbac.bicep' = if (grantDeployerOperatorRoles && !empty(principalId)) {
  name: 'operator-rbac'
  scope: rg
  params: {
    operatorPrincipalId: principalId
    operatorPrincipalType: principalType
    serviceBusName: serviceBus.outputs.name
    ordersQueueName: serviceBus.outputs.ordersQueueName
    agentRequestsQueueName: serviceBus.outputs.agentRequestsQueueName
    agentRepliesQueueName: serviceBus.outputs.agentRepliesQueueName
    operatorAlertsQueueName: serviceBus.outputs.operatorAlertsQueueName
    // Empty with sampleApp off: no sample app, no queue, no role on it.
    statusQueueName: sampleApp ? 'status-${sampleAppName}' : ''
    cosmosAccountName: cosmos.outputs.name
    cosmosDatabaseName: cosmos.outputs.databaseName
    dataStorageName: dataStorage.outputs.name
    compensationLogTableName: compensationLogTableName
    hostStorageName: hostStorage.outputs.name
    taskHubInstancesTableName: useDurableTaskScheduler ? '' : taskHubInstancesTableName
    taskHubHistoryTableName: useDurableTaskScheduler ? '' : taskHubHistoryTableName
  }
  // The sample app's status queue exists once the namespace module has run.
  dependsOn: [
    rbac
  ]
}

module functionApp 'modules/functionapp.bicep' = {
  name: 'functionapp'
  scope: rg
  params: {
    logAnalyticsId: monitoring.outputs.logAnalyticsId
    name: functionAppName
    planName: '${abbrs.webServerFarms}${resourceToken}'
    location: location
    tags: tags
    serviceName: 'api'
    identityId: appIdentity.outputs.id
    identityClientId: appIdentity.outputs.clientId
    hostStorageName: hostStorage.outputs.name
    hostBlobEndpoint: hostStorage.outputs.blobEndpoint
    deploymentContainerName: deploymentContainerName
    compensationLogTableEndpoint: dataStorage.outputs.tableEndpoint
    applicationInsightsConnectionString: monitoring.outputs.applicationInsightsConnectionString
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    ordersQueueName: serviceBus.outputs.ordersQueueName
    ordersQueueId: serviceBus.outputs.ordersQueueId
    agentRequestsQueueName: serviceBus.outputs.agentRequestsQueueName
    agentRepliesQueueName: serviceBus.outputs.agentRepliesQueueName
    operatorAlertsQueueName: serviceBus.outputs.operatorAlertsQueueName
    submittingApps: registeredApps
    frontEndClientId: frontEndClientId
    ordersMaxDeliveries: serviceBus.outputs.ordersMaxDeliveryCount
    agentRequestMaxDeliveries: serviceBus.outputs.agentRequestsMaxDeliveryCount
    cosmosEndpoint: cosmos.outputs.endpoint
    cosmosDatabaseName: cosmos.outputs.databaseName
    cosmosContainerName: cosmos.outputs.containerName
    cosmosRecoveryContainerName: cosmos.outputs.recoveryContainerName
    recoveryIndexEnabled: recoveryIndexEnabled
    sqlServerFqdn: sql.outputs.serverFqdn
    sqlDatabaseName: sql.outputs.databaseName
    workflowVersion: workflowVersion
    starterSchedule: starterSchedule
    supervisorSchedule: supervisorSchedule
    leaderLeaseSeconds: leaderLeaseSeconds
    maximumInstanceCount: functionMaximumInstanceCount
    instanceMemoryMB: functionInstanceMemoryMB
    virtualNetworkSubnetId: network.outputs.appSubnetId
    durableBackend: durableBackend
    durableTaskHubName: durableTaskHubName
    durableTaskSchedulerEndpoint: useDurableTaskScheduler ? durableTask.outputs.endpoint : ''
  }
  // The identity's roles (deployment package, host storage) must exist before the host starts.
  dependsOn: [
    rbac
  ]
}

module agent 'modules/containerapp.bicep' = {
  name: 'agent'
  scope: rg
  params: {
    name: '${abbrs.appContainerApps}agent-${resourceToken}'
    environmentName: '${abbrs.appManagedEnvironments}${resourceToken}'
    registryLoginServer: registry.outputs.loginServer
    location: location
    tags: tags
    serviceName: 'agent'
    identityId: agentIdentity.outputs.id
    identityClientId: agentIdentity.outputs.clientId
    logAnalyticsId: monitoring.outputs.logAnalyticsId
    applicationInsightsConnectionString: monitoring.outputs.applicationInsightsConnectionString
    serviceBusFullyQualifiedNamespace: serviceBus.outputs.fullyQualifiedNamespace
    agentRequestsQueueName: serviceBus.outputs.agentRequestsQueueName
    agentRepliesQueueName: serviceBus.outputs.agentRepliesQueueName
    remoteUrl: agentRemoteUrl
    remoteAudience: deploySimulator ? (empty(remoteClientId) ? '' : 'api://${remoteClientId}') : agentRemoteAudience
    deploySimulator: deploySimulator
    simulatorName: '${abbrs.appContainerApps}sim-${resourceToken}'
    simulatorIdentityId: deploySimulator ? simulatorIdentity.outputs.id : ''
    simulatorIdentityClientId: deploySimulator ? simulatorIdentity.outputs.clientId : ''
    simulatorImageName: simulatorImageName
    remoteClientId: remoteClientId
    authAuthority: environment().authentication.loginEndpoint
    concurrency: agentConcurrency
    replicas: agentReplicas
    imageName: agentImageName
    infrastructureSubnetId: network.outputs.agentSubnetId
  }
  // AcrPull and the queue roles must exist before the first revision pulls and starts.
  dependsOn: [
    rbac
  ]
}

module alerts 'modules/alerts.bicep' = {
  name: 'alerts'
  scope: rg
  params: {
    location: location
    tags: tags
    actionGroupName: '${abbrs.insightsActionGroups}${resourceToken}'
    alertEmail: alertEmail
    serviceBusId: serviceBus.outputs.id
    operatorAlertsQueueName: serviceBus.outputs.operatorAlertsQueueName
    applicationInsightsId: monitoring.outputs.applicationInsightsId
    namePrefix: 'sas-${resourceToken}'
  }
}

// The operator's workbook, under the Application Insights component (docs/operating.md).
module workbook 'modules/workbook.bicep' = {
  name: 'workbook'
  scope: rg
  params: {
    location: location
    tags: tags
    applicationInsightsId: monitoring.outputs.applicationInsightsId
    serviceBusId: serviceBus.outputs.id
    backlogThreshold: functionApp.outputs.backlogThreshold
    maxInFlight: functionApp.outputs.maxInFlight
  }
}

// azd reads these into the environment (.azure/<env>/.env); the post-provision script uses them.
output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output AZURE_CONTAINER_REGISTRY_ENDPOINT string = registry.outputs.loginServer
output AZURE_CONTAINER_REGISTRY_NAME string = registry.outputs.name
output AZURE_CONTAINER_ENVIRONMENT_NAME string = agent.outputs.environmentName
output SERVICE_API_NAME string = functionApp.outputs.name
output SERVICE_AGENT_NAME string = agent.outputs.name
output SERVICE_SIMULATOR_NAME string = agent.outputs.simulatorName
output DEPLOY_SIMULATOR bool = deploySimulator
output AZURE_FUNCTION_APP_NAME string = functionApp.outputs.name
output AZURE_FUNCTION_APP_URL string = 'https://${functionApp.outputs.defaultHostName}'
// What a submitting app asks Entra ID for (client credentials, scope '<audience>/.default').
output API_AUDIENCE string = empty(frontEndClientId) ? '' : 'api://${frontEndClientId}'
// The front end's client ID and the submitting apps the post-provision step assigns its app role
// (infra/scripts/app_roles.py): exactly the Function App's SAS_SUBMITTERS.
output SAS_FRONTEND_CLIENT_ID string = frontEndClientId
output SAS_SUBMITTERS string = functionApp.outputs.submitters
output API_IDENTITY_NAME string = appIdentity.outputs.name
output API_IDENTITY_CLIENT_ID string = appIdentity.outputs.clientId
output AGENT_IDENTITY_NAME string = agentIdentity.outputs.name
output AZURE_SQL_SERVER_NAME string = sql.outputs.serverName
output AZURE_SQL_SERVER_FQDN string = sql.outputs.serverFqdn
output AZURE_SQL_DATABASE_NAME string = sql.outputs.databaseName
output SERVICEBUS_FULLY_QUALIFIED_NAMESPACE string = serviceBus.outputs.fullyQualifiedNamespace
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
output COMPENSATION_LOG_TABLE_ENDPOINT string = dataStorage.outputs.tableEndpoint
output DURABLE_BACKEND string = durableBackend
// `ops --azd instances` reads the Azure Storage backend's task hub (<hub>Instances) there.
output AZURE_HOST_STORAGE_ACCOUNT_NAME string = hostStorage.outputs.name
output DURABLE_TASK_HUB_NAME string = durableTaskHubName
output DURABLE_TASK_SCHEDULER_ENDPOINT string = useDurableTaskScheduler ? durableTask.outputs.endpoint : ''
output NETWORK_ISOLATION bool = networkIsolation
output APPLICATIONINSIGHTS_CONNECTION_STRING string = monitoring.outputs.applicationInsightsConnectionString
