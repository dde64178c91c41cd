"""``python -m harness.tools.iac [ROOT]``: the project's Bicep and cross-checks; exit 1 on any problem."""

import argparse
import sys
import time
from pathlib import Path

from harness.tools.iac import app_roles, cross_checks, first_deployment, isolation, trigger_roles, variants
from harness.tools.iac.infra_rules import check_infra
from harness.tools.iac.problems import Report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.tools.iac", description=__doc__)
    parser.add_argument("root", nargs="?", default=".", type=Path, help="the repository root (default: .)")
    args = parser.parse_args(argv)
    root: Path = args.root.resolve()
    started = time.monotonic()
    report = Report()
    deployment = check_infra(root, report)
    cross_checks.check(root, deployment, report)
    isolation.check(root, deployment, report)
    trigger_roles.check(root, deployment, report)
    variants.check(root, deployment, report)
    first_deployment.check(root, deployment, report)
    if deployment is not None and deployment.instances:
        app_roles.check(root, deployment, deployment.instances[0], report)
    for problem in report.problems:
        print(problem)
    elapsed = time.monotonic() - started
    if report.problems:
        print(f"iac: {len(report.problems)} problem(s) in {elapsed:.1f}s", file=sys.stderr)
        return 1
    files = len({i.file.rel for i in deployment.instances}) if deployment else 0
    resources = sum(len(list(i.all_resources())) for i in deployment.instances) if deployment else 0
    print(
        f"iac: clean — {files} Bicep files, {resources} resources, code cross-checks passed ({elapsed:.1f}s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
