"""The Function App's Service Bus roles on the queues its triggers read, and Azure Service Bus Data
Owner nowhere else.

Each ``@app.service_bus_queue_trigger`` of ``function_app.py`` reads a queue (its ``queue_name``, a
literal or a ``%SETTING%`` the Function App's app settings name). On each such queue the Function
App's identity must hold, scoped to that queue, every role of ``policy.TRIGGER_QUEUE_ROLES``:

- Azure Service Bus Data Receiver: the trigger receives, completes and dead-letters;
- Azure Service Bus Data Owner: on Flex Consumption the platform scales the app with the Service
  Bus extension's target-based scaler, which reads the queue's active message count with the
  administration client (``GetQueueRuntimePropertiesAsync``). That needs Service Bus's Manage right,
  and Data Owner is the only built-in role that has it. Without it the scaler gets
  ``UnauthorizedAccessException`` and scaling "reverts to incremental scale" (Microsoft Learn,
  functions-target-based-scaling, "Service Bus queues and topics"; the extension's
  ServiceBusMetricsProvider.cs). infra/README.md lists the sources.

Data Owner also lets its holder change or delete the queue, so it is allowed only there: any other
Data Owner assignment (another identity, another queue, a namespace or wider scope) is a problem.

Which identity is the Function App's: the user-assigned identities of its
``identity.userAssignedIdentities``, traced to the identity resource they come from (the
evaluator's ``Unknown.origin``), the same resource whose ``principalId`` a role assignment names.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.tools.iac import code_facts, cross_checks, isolation, policy
from harness.tools.iac.bicep import Resource, Unknown
from harness.tools.iac.code_facts import Binding
from harness.tools.iac.infra_rules import Deployment
from harness.tools.iac.problems import Report

Origin = tuple[tuple[str, ...], str]
ROLE_NAMES = {guid.lower(): name for name, guid in policy.ALLOWED_ROLES.items()}
INTERPOLATED = re.compile(r"\$\{([^{}]+)\}")
RBAC = "infra/modules/rbac.bicep"


@dataclass
class App:
    site: Resource
    label: str
    identities: set[Origin] = field(default_factory=set)
    queues: dict[str, Binding] = field(default_factory=dict)  # queue -> the trigger that reads it


def check(root: Path, deployment: Deployment | None, report: Report) -> None:
    if deployment is None:
        return
    try:
        bindings = code_facts.bindings(root)
    except (code_facts.CodeError, SyntaxError):
        return  # cross_checks reports it
    for binding in (b for b in bindings if b.decorator in policy.SERVICE_BUS_TOPIC_TRIGGERS):
        report.add(
            binding.where.file,
            binding.where.line,
            f"{binding.function} is a Service Bus topic trigger: the role rule knows queue triggers only",
            "extend harness/tools/iac/trigger_roles.py to subscriptions (roles scoped to the subscription)",
        )
    triggers = [b for b in bindings if b.decorator in policy.SERVICE_BUS_QUEUE_TRIGGERS]
    apps = _apps(deployment, triggers, report)
    assignments = [
        r for r in deployment.resources("Microsoft.Authorization/roleAssignments") if r.deployed is not False
    ]
    for app in apps:
        for queue, binding in sorted(app.queues.items()):
            for role, why in policy.TRIGGER_QUEUE_ROLES.items():
                if not any(_holds(a, app.identities, role, queue) for a in assignments):
                    report.add(
                        binding.where.file,
                        binding.where.line,
                        f"the identity of {app.label} holds no {ROLE_NAMES[role.lower()]} on queue "
                        f"'{queue}', which {binding.function} reads: {why}",
                        f"assign it to the Function App's identity, scoped to that queue ({RBAC})",
                    )
    for assignment in assignments:
        if isolation.role_of(assignment) == policy.SERVICE_BUS_DATA_OWNER.lower():
            _check_data_owner(assignment, apps, report)


def _origin(value: object) -> Origin | None:
    return value.origin if isinstance(value, Unknown) else None


def _holds(assignment: Resource, identities: set[Origin], role: str, queue: str) -> bool:
    return (
        isolation.role_of(assignment) == role.lower()
        and isolation.scope_of(assignment) == isolation.Scope("queue", queue)
        and _origin(assignment.get("properties", "principalId")) in identities
    )


def _check_data_owner(assignment: Resource, apps: list[App], report: Report) -> None:
    principal = _origin(assignment.get("properties", "principalId"))
    scope = isolation.scope_of(assignment)
    owners = [app for app in apps if principal is not None and principal in app.identities]
    if scope.kind == "queue" and any(scope.name in app.queues for app in owners):
        return
    who = f"the identity of {owners[0].label}" if owners else "an identity other than the Function App's"
    where = f"on {scope}" if scope.kind in ("queue", "namespace") else f"at {scope}"
    queues = sorted({queue for app in apps for queue in app.queues})
    report.add(
        assignment.file.rel,
        assignment.line,
        f"role assignment '{assignment.symbol}' grants Azure Service Bus Data Owner to {who} {where}: "
        f"Data Owner is allowed only to the Function App's identity, scoped to a queue its Service Bus "
        f"triggers read ({', '.join(queues) or 'none'}), for target-based scaling",
        "grant Azure Service Bus Data Sender or Data Receiver, scoped to the queue, instead "
        "(harness/tools/iac/policy.py TRIGGER_QUEUE_ROLES)",
    )


def _apps(deployment: Deployment, triggers: list[Binding], report: Report) -> list[App]:
    """Each Function App with its identities and the queues its Service Bus triggers read."""
    targets = {(t.file, t.line): t for t in cross_checks.function_apps(deployment, Report())}
    apps: list[App] = []
    for instance in deployment.instances:
        for site in (r for r in instance.all_resources() if cross_checks.is_function_app(r)):
            app = App(site, f"the Function App '{site.symbol}'")
            identities = site.get("identity", "userAssignedIdentities")
            for key in identities if isinstance(identities, dict) else {}:
                match = INTERPOLATED.fullmatch(key)
                origin = _origin(instance.eval_path(match.group(1).strip(), {})) if match else None
                if origin is not None:
                    app.identities.add(origin)
            if triggers and not app.identities:
                report.add(
                    site.file.rel,
                    site.file.line_of("identity", site.line, site.end_line) or site.line,
                    f"{app.label}: cannot tell its user-assigned identity offline, so not which roles "
                    "its Service Bus triggers' queues grant it",
                    "give it a user-assigned identity from an identity module's outputs "
                    "(userAssignedIdentities: { '${identityId}': {} })",
                )
            target = targets.get((site.file.rel, site.line))
            for binding in triggers:
                queue = binding.queue_name
                if queue is None and binding.queue_setting and target is not None:
                    queue = target.values.get(binding.queue_setting)
                if isinstance(queue, str):
                    app.queues.setdefault(queue, binding)
                else:
                    why = queue.why if isinstance(queue, Unknown) else f"{binding.queue_setting} is not set"
                    report.add(
                        binding.where.file,
                        binding.where.line,
                        f"{binding.function}: which queue it reads in {app.label} is unknown offline ({why})",
                        "name the queue with a literal, a parameter or a module output",
                    )
            apps.append(app)
    return apps
