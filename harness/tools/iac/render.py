"""``python -m harness.tools.iac.render ROOT OUT``: each deployment option combination as literal Bicep.

checkov reads each Bicep file on its own and evaluates neither parameters nor conditions: a
property set from ``networkIsolation`` (``publicNetworkAccess: publicNetworkAccess``) is, to it, an
expression, whatever the combination. There is no Bicep compiler in CI to build each
combination's template. So, for each combination of ``variants.COMBINATIONS``, this evaluates
main.bicep as the project checker does and writes ``OUT/<combination>/<module path>.bicep``: every
resource that combination deploys, its body as the values the evaluator computed (what needs a
deployment, such as an ID, becomes the string ``'unknownoffline'``; ``parent``, ``scope`` and
``dependsOn`` are left out). ``checkov_check`` scans these copies too, so each combination's
resources pass checkov with the values that combination gives them.

Runs under ``.venv-bicep`` (the evaluator needs pycep-parser 0.7.1).
"""

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from harness.tools.iac import variants
from harness.tools.iac.bicep import Resource, Unknown
from harness.tools.iac.infra_rules import check_infra
from harness.tools.iac.problems import Report

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DROPPED = ("parent", "scope", "dependsOn")
# Lower-case letters only: it stands in names too (a storage account name is 3-24 of [a-z0-9]).
UNKNOWN = "unknownoffline"


def literal(value: Any, indent: str = "") -> str:  # noqa: PLR0911 - one return per kind of value
    """The value as Bicep: objects and arrays one entry a line (the subset pycep parses)."""
    inner = indent + "  "
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value) if isinstance(value, int) else f"json('{value}')"
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("${", "\\${").replace("\n", "\\n")
        return f"'{escaped}'"
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = [f"{inner}{_key(k)}: {literal(v, inner)}" for k, v in value.items()]
        return "{\n" + "\n".join(lines) + f"\n{indent}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + "\n".join(f"{inner}{literal(v, inner)}" for v in value) + f"\n{indent}]"
    if value is None:
        return "null"
    partial = value.partial if isinstance(value, Unknown) else ""
    return literal(partial.replace("<?>", UNKNOWN) if partial else UNKNOWN, indent)


def _key(key: str) -> str:
    return key if IDENT.fullmatch(key) else literal(key)


def resource_text(resource: Resource, symbol: str, api_version: str) -> str:
    body = resource.body if isinstance(resource.body, dict) else {}
    kept = {k: v for k, v in body.items() if k not in DROPPED}
    return f"resource {symbol} '{resource.type}@{api_version}' = {literal(kept)}\n"


def render(root: Path, out: Path) -> list[Path]:
    deployment = check_infra(root, Report())
    if deployment is None or not deployment.instances:
        raise SystemExit("render: infra/main.bicep does not evaluate (run python -m harness.tools.iac)")
    written: list[Path] = []
    for combination, variant in variants.each(root, deployment):
        target = out / dirname(combination)
        target.mkdir(parents=True, exist_ok=True)
        for instance in variant.instances:
            parts: list[str] = [
                f"// {instance.file.rel} as {'/'.join(instance.path) or 'main'}, {combination}\n"
            ]
            for symbol, decl in instance.file.section("resources").items():
                found = [r for r in instance.resources(symbol) if r.deployed is True and not r.existing]
                for index, resource in enumerate(found):
                    name = symbol if len(found) == 1 else f"{symbol}_{index}"
                    parts.append(resource_text(resource, name, str(decl.get("api_version"))))
            if len(parts) > 1:
                path = target / f"{'.'.join(instance.path) or 'main'}.bicep"
                path.write_text("\n".join(parts), encoding="utf-8")
                written.append(path)
    return written


def dirname(combination: variants.Combination) -> str:
    return f"{combination.durable_backend}-isolation-{str(combination.network_isolation).lower()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.tools.iac.render", description=__doc__)
    parser.add_argument("root", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    written = render(args.root.resolve(), args.out.resolve())
    print(f"render: {len(written)} files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
