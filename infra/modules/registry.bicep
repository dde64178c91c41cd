// The container registry azd pushes the agent image to (AZURE_CONTAINER_REGISTRY_ENDPOINT). No
// admin user and no anonymous pull: azd pushes with the deployer's Entra token and the agent's
// identity pulls with AcrPull (rbac.bicep).

@description('Name of the container registry (5-50 letters and digits).')
param name string

@description('Azure region of the registry.')
param location string

@description('Tags applied to the registry.')
param tags object

resource registry 'Microsoft.ContainerRegistry/registries@2023-07-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: 'Basic'
  }
  properties: {
    adminUserEnabled: false
    anonymousPullEnabled: false
    publicNetworkAccess: 'Enabled'
  }
}

output id string = registry.id
output name string = registry.name
output loginServer string = registry.properties.loginServer
