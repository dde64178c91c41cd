"""The copies of the repository the IaC tests break: ``clean`` once per session, ``root`` per test."""

from pathlib import Path

import pytest

from tests.support.iac import BICEP_PYTHON, CHECKOV_PYTHON, NO_BICEP, NO_CHECKOV, copy_repo


@pytest.fixture(autouse=True)
def _checker_venvs(request: pytest.FixtureRequest) -> None:
    """A test marked `iac` runs the checkers: without their venvs it fails saying how to make them."""
    if request.node.get_closest_marker("iac") is None:
        return
    for python, missing in ((BICEP_PYTHON, NO_BICEP), (CHECKOV_PYTHON, NO_CHECKOV)):
        if not python.exists():
            pytest.fail(missing)


@pytest.fixture(scope="session")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("clean"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return copy_repo(tmp_path)
