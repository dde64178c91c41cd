"""The tier guard (tests/conftest.py): a test that reaches a server fixture without that fixture's
marker fails, so it cannot run in the fast tier unnoticed."""

import pytest

# The fixture is a stand-in under the real fixture's name: the guard goes by name, and this test
# must not start a server to show it.
TESTS = """
import pytest

@pytest.fixture
def postgres_odbc():
    return "Driver={PostgreSQL Unicode}"

def test_unmarked(postgres_odbc):
    pass

def test_unmarked_through_getfixturevalue(request):
    request.getfixturevalue("postgres_odbc")

@pytest.mark.emulators
def test_marked(postgres_odbc):
    pass

def test_without_a_server():
    pass
"""


def test_a_test_reaching_a_server_fixture_without_its_marker_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "from tests.conftest import _server_fixtures_need_their_marker, pytest_collection_modifyitems\n"
    )
    pytester.makepyfile(test_guarded=TESTS)
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-W", "ignore")
    result.assert_outcomes(passed=4, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*test_unmarked lacks its tier marker: postgres_odbc needs @pytest.mark.emulators",
            "*test_unmarked_through_getfixturevalue lacks its tier marker: postgres_odbc needs*",
        ]
    )


def test_only_tests_without_a_tier_marker_are_fast(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("from tests.conftest import pytest_collection_modifyitems\n")
    pytester.makepyfile(test_tiers=TESTS)
    result = pytester.runpytest_inprocess("-p", "no:xdist", "-W", "ignore", "-m", "fast")
    result.assert_outcomes(passed=3, deselected=1)  # the guard is not loaded: the unmarked pass
