"""Every combination of main.bicep's deployment options, checked.

``durableBackend`` and ``networkIsolation`` switch resources on and off (``if (...)``) and change
properties (``publicNetworkAccess``, the Service Bus SKU, app settings). The evaluator computes a
resource's ``if`` and a ternary only for known parameter values, so one evaluation checks one
combination; there is no Bicep compiler in CI to render the others. So ``main.bicep`` is evaluated
once per combination (``COMBINATIONS``) and each evaluation gets the project's rules
(``infra_rules``, ``cross_checks``, ``trigger_roles``, ``diagnostics``) and the rules of both options
(``durable``, ``network``). A problem that only one combination has names it, e.g.
``[durableBackend=durableTaskScheduler networkIsolation=true]``.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.tools.iac import cross_checks, diagnostics, durable, network, policy, trigger_roles
from harness.tools.iac.bicep import Instance
from harness.tools.iac.infra_rules import Deployment, check_resources, parameters_json_values
from harness.tools.iac.problems import Problem, Report


@dataclass(frozen=True)
class Combination:
    durable_backend: str
    network_isolation: bool

    @property
    def params(self) -> dict[str, Any]:
        return {
            policy.DURABLE_BACKEND_PARAM: self.durable_backend,
            policy.NETWORK_ISOLATION_PARAM: self.network_isolation,
        }

    def __str__(self) -> str:
        isolation = str(self.network_isolation).lower()
        return (
            f"[{policy.DURABLE_BACKEND_PARAM}={self.durable_backend} "
            f"{policy.NETWORK_ISOLATION_PARAM}={isolation}]"
        )


COMBINATIONS: tuple[Combination, ...] = tuple(
    Combination(backend, isolated) for backend in policy.DURABLE_BACKENDS for isolated in (False, True)
)


def evaluate(root: Path, main: Instance, combination: Combination) -> Deployment:
    """main.bicep evaluated with main.parameters.json and this combination's options."""
    return evaluate_with(root, main, combination.params)


def evaluate_with(root: Path, main: Instance, params: dict[str, Any]) -> Deployment:
    """main.bicep evaluated with main.parameters.json, ``params`` taking precedence."""
    instance = Instance(main.file, {}, main.loader)
    instance.complete_params({**parameters_json_values(root), **params})
    return Deployment(list(instance.walk()))


def each(root: Path, deployment: Deployment) -> Iterator[tuple[Combination, Deployment]]:
    main = deployment.instances[0]
    declared = main.file.section("parameters")
    for combination in COMBINATIONS:
        if all(name in declared for name in combination.params):
            yield combination, evaluate(root, main, combination)


def check(root: Path, deployment: Deployment | None, report: Report) -> None:
    if deployment is None or not deployment.instances:
        return
    main = deployment.instances[0]
    declared = main.file.section("parameters")
    for name in (policy.DURABLE_BACKEND_PARAM, policy.NETWORK_ISOLATION_PARAM):
        if name not in declared:
            report.add(main.file.rel, None, f"main.bicep declares no parameter '{name}'", "declare it")
    found: dict[Combination, Deployment] = dict(each(root, deployment))
    for combination, variant in found.items():
        own = Report()
        check_resources(variant, own)
        cross_checks.check(root, variant, own)
        trigger_roles.check(root, variant, own)
        durable.check(variant, combination.durable_backend, own)
        network.check(variant, combination.network_isolation, own)
        diagnostics.check(variant, own)
        for problem in own.problems:
            add_labelled(report, problem, str(combination))
    network.check_docs(root, found, report)


def add_labelled(report: Report, problem: Problem, label: str) -> None:
    """The problem as it is, if the default evaluation has it too; else naming the options
    (``label``) under which only it appears."""
    if report.has(problem):
        return
    report.add(problem.file, problem.line, f"{label} {problem.what}", problem.fix)
