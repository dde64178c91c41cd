// Log Analytics + workspace-based Application Insights, both with local authentication off:
// - the component (DisableLocalAuth): telemetry is accepted only with an Entra token, so the
//   identities that send it get Monitoring Metrics Publisher on the component (rbac.bicep);
// - the workspace (features.disableLocalAuth, API 2020-10-01 and later): its shared keys
//   authorise nothing, so no agent or Data Collector API call can write with them
//   (https://learn.microsoft.com/azure/azure-monitor/logs/azure-ad-authentication-logs). Nothing
//   here uses them: the component writes through Azure Monitor, the Container Apps environment
//   sends its logs through a diagnostic setting (destination 'azure-monitor', containerapp.bicep),
//   and queries (the portal, the log alert in alerts.bicep) are authorised by Azure RBAC.

@description('Name of the Log Analytics workspace.')
param logAnalyticsName string

@description('Name of the Application Insights component.')
param applicationInsightsName string

@description('Azure region of the monitoring resources.')
param location string

@description('Tags applied to the monitoring resources.')
param tags object

@description('Days the workspace keeps logs (30 is included in the price).')
@minValue(30)
@maxValue(730)
param retentionInDays int = 30

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: {
      name: 'PerGB2018'
    }
    retentionInDays: retentionInDays
    features: {
      disableLocalAuth: true
      enableLogAccessUsingOnlyResourcePermissions: true
    }
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
    RetentionInDays: retentionInDays
  }
}

output logAnalyticsId string = workspace.id
output logAnalyticsName string = workspace.name
output applicationInsightsId string = appInsights.id
output applicationInsightsName string = appInsights.name
// The connection string names the component and its ingestion endpoint; with DisableLocalAuth the
// key in it authorises nothing (an Entra token is required), so it is not a secret.
output applicationInsightsConnectionString string = appInsights.properties.ConnectionString
