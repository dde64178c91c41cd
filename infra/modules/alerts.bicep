// What pages an operator: an action group that emails, and four rules.
// 1. Operator alerts waiting: active messages on the operator-alerts queue > 0 (E12, C11); it
//    clears when `python -m ops alerts ack|drain` has removed them.
// 2. Dead letters on any queue > 0: a submission, request, reply or status message gave up.
// 3. Supervisor errors: exceptions or error traces from the supervisor function in Application
//    Insights (the Supervisor is the safety net; if it fails nothing recovers expired work).
// 4. Function failures: failed executions of any function (requests with success == false,
//    one alert per operation_Name), e.g. a queue or store it cannot open or an unhandled
//    exception, which leaves no order behind to look at (issue 36 item 4). Locally, devhost's
//    invocation results answer the same question (`ops status`, `ops watch`, the local page).

@description('Azure region of the log alert rule.')
param location string

@description('Tags applied to the alerting resources.')
param tags object

@description('Name of the action group.')
param actionGroupName string

@description('Email address that receives the alerts; empty for an action group without receivers.')
param alertEmail string

@description('Resource ID of the Service Bus namespace.')
param serviceBusId string

@description('Name of the operator alerts queue.')
param operatorAlertsQueueName string

@description('Resource ID of the Application Insights component.')
param applicationInsightsId string

@description('Name prefix of the alert rules.')
param namePrefix string

var emailReceivers = [
  {
    name: 'operators'
    emailAddress: alertEmail
    useCommonAlertSchema: true
  }
]

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {
  name: actionGroupName
  location: 'global'
  tags: tags
  properties: {
    groupShortName: 'sas-ops'
    enabled: true
    emailReceivers: empty(alertEmail) ? [] : emailReceivers
  }
}

resource operatorAlerts 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: '${namePrefix}-operator-alerts'
  location: 'global'
  tags: tags
  properties: {
    description: 'An operator alert is waiting on the operator-alerts queue (an order went to Error, or a submission was dead-lettered). Read them with `python -m ops alerts`; the rule clears once they are acknowledged: `python -m ops alerts ack MESSAGE_ID` (or `python -m ops alerts drain`). See docs/operating.md, Runbook: operator alerts.'
    severity: 1
    enabled: true
    scopes: [
      serviceBusId
    ]
    evaluationFrequency: 'PT1M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'OperatorAlertsWaiting'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'ActiveMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                operatorAlertsQueueName
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}

resource deadLetters 'Microsoft.Insights/metricAlerts@2018-03-01' = {
  name: '${namePrefix}-dead-letters'
  location: 'global'
  tags: tags
  properties: {
    description: 'A queue has dead-lettered messages: read them with the operator CLI, fix the cause, resubmit or discard.'
    severity: 2
    enabled: true
    scopes: [
      serviceBusId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      'odata.type': 'Microsoft.Azure.Monitor.SingleResourceMultipleMetricCriteria'
      allOf: [
        {
          criterionType: 'StaticThresholdCriterion'
          name: 'DeadLetteredMessages'
          metricNamespace: 'Microsoft.ServiceBus/namespaces'
          metricName: 'DeadletteredMessages'
          dimensions: [
            {
              name: 'EntityName'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          timeAggregation: 'Maximum'
        }
      ]
    }
    actions: [
      {
        actionGroupId: actionGroup.id
      }
    ]
  }
}

resource supervisorErrors 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${namePrefix}-supervisor-errors'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Supervisor errors'
    description: 'The supervisor function logged an exception or an error: expired work may not be recovered until it is fixed.'
    severity: 1
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: 'union exceptions, (traces | where severityLevel >= 3) | where operation_Name =~ "supervisor"'
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [
        actionGroup.id
      ]
    }
  }
}

// Schema: Microsoft.Insights/scheduledQueryRules, criteria.allOf[].dimensions {name, operator
// 'Include', values ['*']} splits the alert by a column (learn.microsoft.com/azure/templates/
// microsoft.insights/scheduledqueryrules). The Functions host writes one requests row per
// execution, operation_Name = the function, success = false when it failed.
resource functionFailures 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = {
  name: '${namePrefix}-function-failures'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: 'Function failures'
    description: 'A function execution failed (a queue or store it cannot open, an unhandled exception): see the workbook\'s "Function failures" panel for its last error.'
    severity: 2
    enabled: true
    scopes: [
      applicationInsightsId
    ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT5M'
    autoMitigate: true
    criteria: {
      allOf: [
        {
          query: 'requests | where success == false | project timestamp, operation_Name'
          timeAggregation: 'Count'
          dimensions: [
            {
              name: 'operation_Name'
              operator: 'Include'
              values: [
                '*'
              ]
            }
          ]
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    actions: {
      actionGroups: [
        actionGroup.id
      ]
    }
  }
}

output actionGroupId string = actionGroup.id
