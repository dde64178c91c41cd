// The virtual network the Function App is integrated into, in both modes of networkIsolation
// (main.bicep), and with networkIsolation the private DNS zones of the data services (their private
// endpoints: private-endpoints.bicep, deployed after the services, which need the app's subnet).
//
// Why a virtual network even with networkIsolation off: the SQL server admits no "allow all Azure
// services" rule (0.0.0.0), and a Flex Consumption app without a virtual network has no fixed
// outbound address to admit instead. So the app's subnet carries the service endpoints of SQL,
// Cosmos DB and Storage, and those services admit that subnet (virtual network rules: sql.bicep,
// cosmos.bicep, storage.bicep) and, for `ops`, the operator's address; with networkIsolation their
// public access is off and the app uses their private endpoints instead. A virtual network, its
// subnets and a service endpoint cost nothing.
//
// Subnets:
// - app: the Function App's virtual network integration; Flex Consumption needs the delegation to
//   Microsoft.App/environments (and nothing else in the subnet);
// - agent: the Container Apps environment of the agent (workload profiles: delegated to
//   Microsoft.App/environments too, /27 or larger); used with networkIsolation only;
// - endpoints: the private endpoints (networkIsolation only).
// defaultOutboundAccess is stated: subnets of virtual networks created since Microsoft retired
// default outbound access for new networks are private (no internet egress) unless it is true,
// and the app and the agent still reach public endpoints (Application Insights ingestion, the
// agent's remote service, and every data service with networkIsolation off). Production: a NAT
// gateway (docs/deploying.md "Private network").
//
// The private DNS zone names are Azure public cloud's (Flex Consumption's regions); each zone is
// linked to the network so the services' usual host names resolve to their private endpoints.

@description('Name of the virtual network.')
param name string

@description('Azure region of the network and the private endpoints.')
param location string

@description('Tags applied to the network resources.')
param tags object

@description('Whether the data services are reached through private endpoints only (networkIsolation).')
param isolated bool

@description('Private DNS zones to create and link: one per zone the private endpoints use.')
param privateDnsZones array

resource vnet 'Microsoft.Network/virtualNetworks@2024-05-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        '10.0.0.0/16'
      ]
    }
    subnets: [
      {
        name: 'app'
        properties: {
          addressPrefix: '10.0.0.0/24'
          defaultOutboundAccess: true
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
          // One per data service that admits this subnet while its public access is on: SQL
          // (sql.bicep), Cosmos DB (cosmos.bicep) and the compensation log's storage account
          // (storage.bicep). Service endpoints are free; a virtual network rule is refused unless the
          // subnet carries the service's endpoint (ignoreMissingVnetServiceEndpoint false).
          serviceEndpoints: [
            {
              service: 'Microsoft.Sql'
            }
            {
              service: 'Microsoft.AzureCosmosDB'
            }
            {
              service: 'Microsoft.Storage'
            }
          ]
        }
      }
      {
        name: 'agent'
        properties: {
          addressPrefix: '10.0.2.0/23'
          defaultOutboundAccess: true
          delegations: [
            {
              name: 'container-apps'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
        }
      }
      {
        name: 'endpoints'
        properties: {
          addressPrefix: '10.0.1.0/24'
          defaultOutboundAccess: false
          privateEndpointNetworkPolicies: 'Disabled'
        }
      }
    ]
  }
}

resource zones 'Microsoft.Network/privateDnsZones@2024-06-01' = [for zone in privateDnsZones: {
  name: zone
  location: 'global'
  tags: tags
}]

resource zoneLinks 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = [for (zone, i) in privateDnsZones: {
  parent: zones[i]
  name: '${name}-link'
  location: 'global'
  tags: tags
  properties: {
    registrationEnabled: false
    virtualNetwork: {
      id: vnet.id
    }
  }
}]

output id string = vnet.id
output endpointsSubnetId string = '${vnet.id}/subnets/endpoints'
output appSubnetId string = '${vnet.id}/subnets/app'
output agentSubnetId string = isolated ? '${vnet.id}/subnets/agent' : ''
