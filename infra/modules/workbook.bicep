// The operator's workbook (docs/operating.md, "The operator's picture"): Azure Monitor's view of
// this pattern, linked to the Application Insights component so it is listed under the
// component's and the Function App's Workbooks. Its queries run as the signed-in user (Azure
// RBAC on the component and the namespace): the workbook holds no key and no connection string.
// The content is ../workbooks/operator.workbook.json, checked by tests/iac/test_workbook.py
// against the names the code emits; the deployment fills in what only it knows.

@description('Azure region of the workbook (that of the Application Insights component).')
param location string

@description('Tags applied to the workbook.')
param tags object

@description('Resource ID of the Application Insights component the workbook reads and is listed under.')
param applicationInsightsId string

@description('Resource ID of the Service Bus namespace whose dead-letter metrics the workbook charts.')
param serviceBusId string

@description('The Function App\'s SAS_BACKLOG_THRESHOLD, drawn beside the backlog.')
param backlogThreshold string

@description('The Function App\'s SAS_MAX_IN_FLIGHT, drawn beside the orders in flight.')
param maxInFlight string

@description('Display name of the workbook.')
param displayName string = 'Scheduler Agent Supervisor'

var template = loadTextContent('../workbooks/operator.workbook.json')
var withNamespace = replace(template, '__SERVICE_BUS_ID__', serviceBusId)
var withThreshold = replace(withNamespace, '__BACKLOG_THRESHOLD__', backlogThreshold)
var content = replace(withThreshold, '__MAX_IN_FLIGHT__', maxInFlight)

// Not named `workbook`: the offline evaluator reads the literal 'workbook' (category) as that symbol.
resource operatorWorkbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  // A workbook's name must be a GUID: stable per component, so a redeployment updates it.
  name: guid(applicationInsightsId, 'scheduler-agent-supervisor-workbook')
  location: location
  tags: union(tags, {
    'hidden-title': displayName
  })
  kind: 'shared'
  properties: {
    displayName: displayName
    category: 'workbook'
    sourceId: applicationInsightsId
    version: 'Notebook/1.0'
    serializedData: content
  }
}

output id string = operatorWorkbook.id
