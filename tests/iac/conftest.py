"""The copies of the repository the IaC tests break: ``clean`` once per session, ``root`` per test."""

from pathlib import Path

import pytest

from tests.iac.test_iac import copy_repo


@pytest.fixture(scope="session")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_repo(tmp_path_factory.mktemp("clean"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return copy_repo(tmp_path)
