// The private endpoints of the data services (networkIsolation, main.bicep), each registered in
// its private DNS zone (network.bicep) so the service's usual host name resolves to it.

@description('Azure region of the private endpoints.')
param location string

@description('Tags applied to the private endpoints.')
param tags object

@description('Subnet of the private endpoints (network.bicep).')
param subnetId string

@description('Private endpoints: [{ name, serviceId, groupId, zone }] (main.bicep).')
param privateEndpoints array

resource endpoints 'Microsoft.Network/privateEndpoints@2024-05-01' = [for target in privateEndpoints: {
  name: target.name
  location: location
  tags: tags
  properties: {
    subnet: {
      id: subnetId
    }
    privateLinkServiceConnections: [
      {
        name: target.name
        properties: {
          privateLinkServiceId: target.serviceId
          groupIds: [
            target.groupId
          ]
        }
      }
    ]
  }
}]

resource endpointDns 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = [for (target, i) in privateEndpoints: {
  parent: endpoints[i]
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [
      {
        name: target.groupId
        properties: {
          privateDnsZoneId: resourceId('Microsoft.Network/privateDnsZones', target.zone)
        }
      }
    ]
  }
}]
