"""The GitHub configuration a user's repository runs (.github/): both workflows and the Dependabot
file valid against GitHub's published schemas, clean under actionlint, running only commands the
docs give, reading only the variables `azd pipeline config` sets, and holding no secret. Each
check is shown failing on a broken copy."""

import shutil
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from harness.tools.pipeline import check

pytestmark = pytest.mark.processes  # check-jsonschema and actionlint run as child processes

REPO = Path(__file__).resolve().parents[2]
COPIED = (".github", "azure.yaml", "README.md", "docs/deploying.md", ".ci/run")


def copy(tmp_path: Path) -> Path:
    for name in COPIED:
        source, target = REPO / name, tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def test_the_repositorys_github_configuration_has_no_problem() -> None:
    assert check.problems(REPO) == []


def test_a_workflow_outside_githubs_schema_fails(tmp_path: Path) -> None:
    repo = copy(tmp_path)
    edit(repo / ".github/workflows/test.yml", "    runs-on: ubuntu-24.04\n", "    runs_on: ubuntu-24.04\n")
    assert any(problem.startswith("schema:") for problem in check.problems(repo))


def test_a_dependabot_file_outside_its_schema_fails(tmp_path: Path) -> None:
    repo = copy(tmp_path)
    edit(repo / ".github/dependabot.yml", "interval: weekly", "interval: fortnightly")
    assert any(problem.startswith("schema:") for problem in check.problems(repo))


def test_actionlint_finds_an_unknown_input_and_an_injectable_expression(tmp_path: Path) -> None:
    repo = copy(tmp_path)
    workflow = repo / ".github/workflows/azure-dev.yml"
    edit(workflow, 'python-version: "3.13"', 'pyhton-version: "3.13"')
    edit(workflow, "run: make venv", "run: make venv ${{ github.event.head_commit.message }}")
    found = [problem for problem in check.problems(repo) if problem.startswith("actionlint:")]
    assert any('input "pyhton-version" is not defined' in problem for problem in found), found
    assert any("potentially untrusted" in problem for problem in found), found


def test_a_command_the_docs_do_not_give_fails(tmp_path: Path) -> None:
    repo = copy(tmp_path)
    edit(repo / ".github/workflows/azure-dev.yml", "run: azd deploy --no-prompt", "run: azd deploy --all")
    assert "azure-dev.yml: step 'Deploy' runs 'azd deploy --all', which is not in docs/deploying.md" in (
        check.problems(repo)
    )
    edit(repo / ".github/workflows/test.yml", "run: make test", "run: make lint")
    assert "test.yml: step 'make test' runs 'make lint', which is not in README.md or .ci/run" in (
        check.problems(repo)
    )


def test_the_deploy_workflow_reads_exactly_the_variables_azd_pipeline_config_sets(tmp_path: Path) -> None:
    repo = copy(tmp_path)
    edit(repo / "azure.yaml", "    - SAS_ALERT_EMAIL\n", "")
    edit(repo / ".github/workflows/azure-dev.yml", "      SAS_SAMPLE_APP: ${{ vars.SAS_SAMPLE_APP }}\n", "")
    found = check.problems(repo)
    assert (
        "azure-dev.yml reads vars.SAS_ALERT_EMAIL, which azure.yaml pipeline.variables does not list" in found
    )
    assert "azure.yaml pipeline.variables lists SAS_SAMPLE_APP, which azure-dev.yml never reads" in found


def test_no_workflow_holds_or_reads_a_secret() -> None:
    for workflow in check.workflows(REPO):
        text = workflow.read_text()
        assert "secrets." not in text and "client-secret" not in text and "creds:" not in text, workflow.name
    deploy = YAML(typ="safe").load((REPO / ".github/workflows/azure-dev.yml").read_text())
    assert deploy["permissions"] == {"id-token": "write", "contents": "read"}
    login = next(
        step
        for step in deploy["jobs"]["deploy"]["steps"]
        if str(step.get("uses", "")).startswith("azure/login")
    )
    assert set(login["with"]) == {"client-id", "tenant-id", "subscription-id"}


def test_the_test_workflow_runs_what_ci_and_the_readme_run() -> None:
    steps = list(check.run_commands(REPO / ".github/workflows/test.yml"))
    assert [command for _, command in steps] == ["make test"]
    assert (REPO / ".ci/run").read_text().strip().endswith("make test")
