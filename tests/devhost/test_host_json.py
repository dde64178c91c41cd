"""``python -m harness.devhost start`` refuses a host.json the Functions host refuses, as a start-up error.

The host reads host.json before anything else (``HostJsonFileConfigurationSource.LoadHostConfig``
in azure-functions-host): one JSON object, parsed by Newtonsoft's ``JObject.Parse`` (comments
allowed), with a ``version``. What it cannot use stops it with "Unable to parse host configuration
file '<path>'." or "The host.json file is missing the required 'version' property."; devhost says
the same and exits 2, its code for every start-up error (harness/devhost/README.md).
"""

import shutil
from pathlib import Path

import pytest

from harness.devhost.config import load_host_json, route_prefix
from tests.support.devhost_cli import devhost_start

SAMPLE_APP = Path(__file__).parent / "sample_app"

# Microsoft's samples-v2/function_chaining/host.json (azure-functions-durable-python) ships two
# objects back to back; the host refuses it.
TWO_OBJECTS = '{\n  "version": "2.0"\n}{\n  "version": "2.0"\n}\n'


@pytest.mark.parametrize(
    ("host_json", "error"),
    [
        (TWO_OBJECTS, "Unable to parse host configuration file '{path}'."),
        ('{"version": "2.0",', "Unable to parse host configuration file '{path}'."),
        ('["version"]', "Unable to parse host configuration file '{path}'."),
        ('{"logging": {}}', "The host.json file is missing the required 'version' property."),
    ],
    ids=["two-objects", "truncated", "not-an-object", "no-version"],
)
@pytest.mark.processes  # python -m harness.devhost start
def test_a_host_json_the_host_refuses_is_a_start_up_error(tmp_path: Path, host_json: str, error: str) -> None:
    app_dir = tmp_path / "app"
    shutil.copytree(SAMPLE_APP, app_dir)
    (app_dir / "host.json").write_text(host_json)
    result = devhost_start(app_dir, "--port", "0")
    assert result.returncode == 2, result.stderr
    assert f"devhost: {error.format(path=app_dir / 'host.json')}" in result.stderr
    assert "Traceback" not in result.stderr


def test_comments_are_allowed_as_the_host_allows_them(tmp_path: Path) -> None:
    """Newtonsoft's JObject.Parse skips comments, so a host.json with them starts on Azure."""
    (tmp_path / "host.json").write_text(
        '{\n  // the route prefix\n  "version": "2.0", /* a block */\n'
        '  "extensions": {"http": {"routePrefix": "v1//x"}}\n}\n'
    )
    assert route_prefix(load_host_json(tmp_path)) == "v1//x"


def test_no_host_json_is_the_hosts_default(tmp_path: Path) -> None:
    assert load_host_json(tmp_path) == {"version": "2.0"}
    assert route_prefix(load_host_json(tmp_path)) == "api"
