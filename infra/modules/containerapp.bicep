// The Agent (python -m agent_worker, the image's CMD) as a Container App with its own
// user-assigned identity, in a Container Apps environment whose logs go to Log Analytics through a
// diagnostic setting (no workspace key). The image comes from the registry (registry.bicep), pulled
// with the same identity (AcrPull).
//
// With deploySimulator (a first deployment), the same environment also runs the simulator
// (python -m simulator, simulator/Dockerfile) as the remote service: internal ingress only, so
// only apps in this environment reach it; its own user-assigned identity (AcrPull, nothing else);
// it admits only the agent identity's Entra token for the remote registration (simulator/callers.py),
// and the agent is pointed at it and presents that token (AGENT_REMOTE_AUDIENCE).
//
// No ingress on the agent: it only reads agent-requests and writes agent-replies. A fixed replica count
// rather than a KEDA Service Bus rule, because the scaler reading queue length would need a
// management (Manage / Data Owner) right that the agent identity must not hold.

@description('Name of the Container App of the agent.')
param name string

@description('Name of the Container Apps environment.')
param environmentName string

@description('Login server of the container registry holding the agent image.')
param registryLoginServer string

@description('Azure region of the environment and the app.')
param location string

@description('Tags applied to the resources (the app also gets azd-service-name).')
param tags object

@description('azd service name of the agent in azure.yaml.')
param serviceName string

@description('Resource ID of the agent user-assigned identity.')
param identityId string

@description('Client ID of the agent user-assigned identity.')
param identityClientId string

@description('Resource ID of the Log Analytics workspace that receives the environment logs.')
param logAnalyticsId string

@description('Application Insights connection string (no usable key: Entra tokens only).')
param applicationInsightsConnectionString string

@description('Fully qualified Service Bus namespace.')
param serviceBusFullyQualifiedNamespace string

@description('Queue the agent receives requests from.')
param agentRequestsQueueName string

@description('Queue the agent sends replies to.')
param agentRepliesQueueName string

@description('Base URL of the remote service the agent calls; ignored with deploySimulator.')
param remoteUrl string

@description('App ID URI (api://<client ID>) of the remote service registration the agent asks a token for (AGENT_REMOTE_AUDIENCE); empty: no token.')
param remoteAudience string = ''

@description('Deploy the simulator as the remote service in this environment and point the agent at it.')
param deploySimulator bool = false

@description('Name of the simulator Container App.')
param simulatorName string = ''

@description('azd service name of the simulator in azure.yaml.')
param simulatorServiceName string = 'simulator'

@description('Resource ID of the simulator user-assigned identity.')
param simulatorIdentityId string = ''

@description('Client ID of the simulator user-assigned identity.')
param simulatorIdentityClientId string = ''

@description('Simulator image; empty on the first provision, then the image azd deployed.')
param simulatorImageName string = ''

@description('Client ID of the remote service registration: the audience of the tokens the simulator admits.')
param remoteClientId string = ''

@description('Entra sign-in endpoint whose v2.0 issuer the simulator trusts (environment().authentication.loginEndpoint).')
param authAuthority string = ''

@description('Requests one agent replica works on at once.')
@minValue(1)
@maxValue(256)
param concurrency int

@description('Number of agent replicas (fixed).')
@minValue(1)
@maxValue(10)
param replicas int

@description('Image of the agent; empty on the first provision, then the image azd deployed.')
param imageName string

@description('Subnet of the environment in the virtual network (networkIsolation); empty: none.')
param infrastructureSubnetId string = ''

// No ingress, so internal costs nothing and exposes nothing; the environment reaches the private
// endpoints through the network's private DNS zones.
var vnetConfiguration = {
  infrastructureSubnetId: infrastructureSubnetId
  internal: true
}

resource environment 'Microsoft.App/managedEnvironments@2024-03-01' = {
  name: environmentName
  location: location
  tags: tags
  properties: {
    appLogsConfiguration: {
      destination: 'azure-monitor'
    }
    // Changing it replaces the environment (and the agent's app): choose before the first provision.
    vnetConfiguration: empty(infrastructureSubnetId) ? null : vnetConfiguration
    workloadProfiles: [
      {
        name: 'Consumption'
        workloadProfileType: 'Consumption'
      }
    ]
  }
}

resource environmentLogs 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'logs-to-workspace'
  scope: environment
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

resource agent 'Microsoft.App/containerApps@2024-03-01' = {
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': serviceName })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    environmentId: environment.id
    workloadProfileName: 'Consumption'
    configuration: {
      activeRevisionsMode: 'Single'
      registries: [
        {
          server: registryLoginServer
          identity: identityId
        }
      ]
    }
    template: {
      containers: [
        {
          name: 'agent'
          image: empty(imageName) ? 'mcr.microsoft.com/azuredocs/containerapps-helloworld:latest' : imageName
          resources: {
            cpu: json('0.5')
            memory: '1Gi'
          }
          env: [
            {
              name: 'SAS_PROFILE'
              value: 'azure'
            }
            {
              name: 'AZURE_CLIENT_ID'
              value: identityClientId
            }
            {
              name: 'ServiceBusConnection__fullyQualifiedNamespace'
              value: serviceBusFullyQualifiedNamespace
            }
            {
              name: 'ServiceBusConnection__credential'
              value: 'managedidentity'
            }
            {
              name: 'ServiceBusConnection__clientId'
              value: identityClientId
            }
            {
              name: 'SAS_AGENT_REQUESTS_QUEUE'
              value: agentRequestsQueueName
            }
            {
              name: 'SAS_AGENT_REPLIES_QUEUE'
              value: agentRepliesQueueName
            }
            {
              name: 'AGENT_REMOTE_URL'
              value: deploySimulator ? 'https://${simulatorApp.properties.configuration.ingress.fqdn}' : remoteUrl
            }
            {
              name: 'AGENT_REMOTE_AUDIENCE'
              value: remoteAudience
            }
            {
              name: 'AGENT_CONCURRENCY'
              value: string(concurrency)
            }
            {
              name: 'AGENT_CALL_TIMEOUT_SECONDS'
              value: '5'
            }
            {
              name: 'AGENT_BACKOFF_INITIAL_SECONDS'
              value: '0.2'
            }
            {
              name: 'AGENT_BACKOFF_MAX_SECONDS'
              value: '5'
            }
            {
              name: 'AGENT_BREAKER_FAILURES'
              value: '5'
            }
            {
              name: 'AGENT_BREAKER_RECOVERY_SECONDS'
              value: '10'
            }
            {
              name: 'AGENT_POLL_INTERVAL_SECONDS'
              value: '0.05'
            }
            {
              name: 'AGENT_SHUTDOWN_GRACE_SECONDS'
              value: '20'
            }
            // Idle replicas: a receive call per 15 s, not five a second (within the grace above).
            {
              name: 'AGENT_IDLE_RECEIVE_WAIT_SECONDS'
              value: '15'
            }
            {
              name: 'APPLICATIONINSIGHTS_CONNECTION_STRING'
              value: applicationInsightsConnectionString
            }
            {
              name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING'
              value: 'Authorization=AAD;ClientId=${identityClientId}'
            }
          ]
        }
      ]
      // Longer than AGENT_SHUTDOWN_GRACE_SECONDS: a stopping replica finishes or abandons its requests.
      terminationGracePeriodSeconds: 30
      scale: {
        minReplicas: replicas
        maxReplicas: replicas
      }
    }
  }
}

// The remote service of a first deployment. Its effects ledger is a SQLite file in the replica's
// own file system (/tmp): lost with the replica, which a stand-in can afford. One replica, so every
// call with an idempotency key meets the same ledger.
resource simulatorApp 'Microsoft.App/containerApps@2024-03-01' = if (deploySimulator) {
  name: simulatorName
  location: location
  tags: union(tags, { 'azd-service-name': simulatorServiceName })
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${simulatorIdentityId}': {}
    }
  }
  properties: {
    environmentId: environment.id
    workloadProfileName: 'Consumption'
    configuration: {
      activeRevisionsMode: 'Single'
      // Internal: reachable from this environment's apps only (the agent), never from the internet.
      ingress: {
        external: false
        targetPort: 8080
        transport: 'http'
        allowInsecure: false
      }
      registries: [
        {
          server: registryLoginServer
          identity: simulatorIdentityId
        }
      ]
    }
    template: {
      containers: [
        {
          name: 'simulator'
          image: empty(simulatorImageName) ? 'mcr.microsoft.com/azuredocs/containerapps-helloworld:latest' : simulatorImageName
          resources: {
            cpu: json('0.25')
            memory: '0.5Gi'
          }
          env: [
            {
              name: 'AZURE_CLIENT_ID'
              value: simulatorIdentityClientId
            }
            {
              name: 'SIMULATOR_AUTH_AUTHORITY'
              value: authAuthority
            }
            {
              name: 'SIMULATOR_AUTH_TENANT_ID'
              value: tenant().tenantId
            }
            {
              name: 'SIMULATOR_AUTH_AUDIENCE'
              value: remoteClientId
            }
            // The agent's identity alone may call.
            {
              name: 'SIMULATOR_ALLOWED_CALLERS'
              value: identityClientId
            }
          ]
        }
      ]
      scale: {
        minReplicas: 1
        maxReplicas: 1
      }
    }
  }
}

output name string = agent.name
output environmentName string = environment.name
output simulatorName string = deploySimulator ? simulatorApp.name : ''
