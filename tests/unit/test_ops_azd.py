"""``ops --azd``: the azd environment's values read and checked before anything is sent, the sample
app's token asked for the front end's scope with its certificate, and one-line errors naming
what is missing. It needs no Azure: ``azd`` is a script on PATH that prints an environment's values
(tests/e2e/test_ops_azure.py runs against a real deployment)."""

import importlib.util
import io
import shlex
import stat
import sys
from functools import cache
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from adapters import azure_profile
from domain.errors import DependencyUnavailable
from ops import azd
from ops.cli import EXIT_USAGE, main
from ops.errors import BadArgument

TENANT = "00000000-0000-0000-0000-0000000000aa"
SAMPLE_CLIENT = "33333333-3333-3333-3333-333333333333"
SCRIPTS = Path(__file__).resolve().parents[2] / "infra" / "scripts"


def values(cert: Path, **changes: str) -> dict[str, str]:
    """What the infrastructure's outputs and the post-provision step leave in the environment."""
    base = {
        "AZURE_TENANT_ID": TENANT,
        "AZURE_FUNCTION_APP_URL": "https://func-api-x.azurewebsites.net",
        "API_AUDIENCE": "api://44444444-4444-4444-4444-444444444444",
        "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE": "sb-x.servicebus.windows.net",
        "SAS_SUBMITTERS": f"sample-app={SAMPLE_CLIENT}",
        "SAS_SAMPLE_APP_CLIENT_ID": SAMPLE_CLIENT,
        "SAS_SAMPLE_APP_CERT_PATH": str(cert),
    }
    return {k: v for k, v in (base | changes).items() if v != "<unset>"}


@cache
def registrations() -> ModuleType:
    """infra/scripts/registrations.py, loaded from its path as azd runs it (it imports its sibling
    ``azcli`` as a top-level module)."""
    spec = importlib.util.spec_from_file_location("registrations", SCRIPTS / "registrations.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPTS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


def certificate(path: Path) -> Path:
    """A self-signed certificate with its private key, PEM, made by the pre-provision step's own
    function."""
    registrations().new_certificate(path, "sample-app")
    return path


@pytest.fixture
def fake_azd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An ``azd`` on PATH whose ``env get-values`` prints the values given, and logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "azd.log"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")

    def install(environment: dict[str, str]) -> Path:
        lines = "".join(f'{k}="{v}"\n' for k, v in environment.items())
        script = bin_dir / "azd"
        script.write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(log))}\ncat <<"EOF"\n{lines}EOF\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        return log

    return install


def ops(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), Console(file=out, width=200))
    return code, out.getvalue()


def test_values_are_read_as_azd_prints_them() -> None:
    text = "\n".join(
        [
            'AZURE_FUNCTION_APP_URL="https://func.azurewebsites.net"',
            "# a comment",
            "",
            'QUOTED="a \\"b\\" c\\\\d\\nnext"',
            "SINGLE='as $it is'",
            "NUMBER=8",
            'EMPTY=""',
            'export EXPORTED="yes"',
        ]
    )
    assert azd.parse_values(text) == {
        "AZURE_FUNCTION_APP_URL": "https://func.azurewebsites.net",
        "QUOTED": 'a "b" c\\d\nnext',
        "SINGLE": "as $it is",
        "NUMBER": "8",
        "EMPTY": "",
        "EXPORTED": "yes",
    }
    with pytest.raises(BadArgument, match="not KEY=value"):
        azd.parse_values("no equals sign here")


def test_the_named_environment_is_read_in_the_app_dir(tmp_path: Path, fake_azd: Any) -> None:
    log = fake_azd({"A": "1"})
    assert azd.read_values(tmp_path, "prod") == {"A": "1"}
    assert azd.read_values(tmp_path, None) == {"A": "1"}
    assert log.read_text().splitlines() == ["env get-values --environment prod", "env get-values"]


def test_the_token_is_the_sample_apps_for_the_front_ends_scope(tmp_path: Path) -> None:
    deployment = azd.Deployment(values(certificate(tmp_path / "sample-app.pem")))
    credential = deployment.sample_app_credential()
    # The real class, built from the certificate on disk (which it parses now): no request yet.
    assert type(credential).__name__ == "CertificateCredential"
    assert deployment.scope == "api://44444444-4444-4444-4444-444444444444/.default"
    assert deployment.orders_url == "https://func-api-x.azurewebsites.net/api/orders"

    asked: list[tuple[str, ...]] = []

    class Recording:
        def get_token(self, *scopes: str) -> Any:
            asked.append(scopes)
            return SimpleNamespace(token="the-token", expires_on=0)

    token = azd.token_source(Recording(), deployment.scope)
    assert asked == []  # asked for only when the order is about to be posted
    assert token() == "the-token"
    assert asked == [("api://44444444-4444-4444-4444-444444444444/.default",)]


@pytest.mark.parametrize(
    "missing",
    [
        "SAS_SAMPLE_APP_CLIENT_ID",
        "API_AUDIENCE",
        "AZURE_FUNCTION_APP_URL",
        "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE",
    ],
)
def test_a_missing_value_is_a_one_line_usage_error_naming_it(
    tmp_path: Path, fake_azd: Any, missing: str
) -> None:
    fake_azd(values(certificate(tmp_path / "c.pem"), **{missing: "<unset>"}))
    code, text = ops("--azd", "smoke", "--app-dir", str(tmp_path))
    assert code == EXIT_USAGE
    assert len(text.strip().splitlines()) == 1 and f"the azd environment has no {missing}" in text


def test_a_missing_or_unusable_certificate_is_a_one_line_usage_error_naming_the_file(
    tmp_path: Path, fake_azd: Any
) -> None:
    absent = tmp_path / "nowhere" / "sample-app.pem"
    fake_azd(values(absent))
    code, text = ops("smoke", "--azd-env", "dev", "--app-dir", str(tmp_path))
    assert code == EXIT_USAGE
    assert text.strip() == f"ops: --azd: SAS_SAMPLE_APP_CERT_PATH: no file {absent}"

    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    fake_azd(values(garbage))
    code, text = ops("--azd", "smoke", "--app-dir", str(tmp_path))
    assert code == EXIT_USAGE
    assert len(text.strip().splitlines()) == 1 and f"{garbage} is not usable" in text


def test_only_the_sample_app_submits_against_a_deployment(tmp_path: Path, fake_azd: Any) -> None:
    fake_azd(values(certificate(tmp_path / "c.pem")))
    code, text = ops("--azd", "smoke", "--app", "b", "--app-dir", str(tmp_path))
    assert code == EXIT_USAGE and "submits as the sample app (sample-app), not 'b'" in text


@pytest.mark.parametrize("command", ["resubmit", "compensate"])
def test_commands_that_write_state_records_are_refused_naming_the_role(
    tmp_path: Path, fake_azd: Any, command: str
) -> None:
    log = fake_azd(values(tmp_path / "c.pem"))
    code, text = ops("--azd", command, "o-1")
    assert code == EXIT_USAGE and len(text.strip().splitlines()) == 1
    assert (
        f"{command} writes the order's state record, which needs Cosmos DB Built-in Data Contributor" in text
    )
    assert not log.exists()  # refused before azd is asked


@pytest.mark.parametrize("command", [["submit", "--order-id", "o-1"], ["token", "--app", "a"], ["schema"]])
def test_local_commands_are_refused_in_one_line(tmp_path: Path, fake_azd: Any, command: list[str]) -> None:
    log = fake_azd(values(tmp_path / "c.pem"))
    code, text = ops("--azd", *command)
    assert code == EXIT_USAGE and len(text.strip().splitlines()) == 1
    assert text.startswith(
        f"ops: --azd runs smoke, instances, alerts, dlq, status, show, list, watch; {command[0]} "
    )
    assert not log.exists()


COSMOS = "https://cosmos-x.documents.azure.com:443/"
TABLES = "https://stlogx.table.core.windows.net/"
SQL_SERVER = "sql-x.database.windows.net"


def store_values(cert: Path, **changes: str) -> dict[str, str]:
    stores = {
        "COSMOS_ENDPOINT": COSMOS,
        "COMPENSATION_LOG_TABLE_ENDPOINT": TABLES,
        "AZURE_SQL_SERVER_FQDN": SQL_SERVER,
        "AZURE_SQL_DATABASE_NAME": "orders",
    }
    return values(cert, **(stores | changes))


def test_the_store_commands_read_the_azure_adapters_at_the_deployments_endpoints(tmp_path: Path) -> None:
    deployment = azd.Deployment(store_values(tmp_path / "c.pem", SAS_COSMOS_CONTAINER="state2"))
    settings = deployment.store_settings
    assert settings.profile == "azure"
    assert (settings.cosmos_endpoint, settings.cosmos_connection) == (COSMOS, None)
    assert (settings.cosmos_database, settings.cosmos_container) == ("sas", "state2")
    assert (settings.tables_endpoint, settings.tables_connection) == (TABLES, None)
    # Built, not connected: the Table client makes no request until the first read.
    log = azure_profile.table_compensation_log(settings)
    assert log._table.url == TABLES.rstrip("/") and log._table.table_name == "compensationlog"
    assert deployment.sql_connection_string == (
        "Driver={ODBC Driver 18 for SQL Server};Server=tcp:sql-x.database.windows.net,1433;"
        "Database=orders;Encrypt=yes"
    )
    queues = deployment.queues()
    try:
        ports = deployment.ports(queues)  # every store built on its first call: nothing sent yet
        assert ports.settings == settings and ports.settlement is queues.messaging
        assert ports.leader.acquire("anyone") is False  # ops never runs the Supervisor
    finally:
        queues.close()


@pytest.mark.parametrize(
    "missing", ["COSMOS_ENDPOINT", "COMPENSATION_LOG_TABLE_ENDPOINT", "AZURE_SQL_SERVER_FQDN"]
)
def test_a_store_command_without_a_stores_endpoint_names_it(
    tmp_path: Path, fake_azd: Any, missing: str
) -> None:
    fake_azd(store_values(tmp_path / "c.pem", **{missing: "<unset>"}))
    code, text = ops("--azd", "status", "o-1", "--app-dir", str(tmp_path))
    assert code == EXIT_USAGE and len(text.strip().splitlines()) == 1
    assert f"the azd environment has no {missing} (an output of infra/main.bicep" in text


class Recording:
    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str) -> Any:
        self.asked.append(scopes)
        return SimpleNamespace(token="tok", expires_on=0)


@pytest.mark.emulators  # pyodbc needs unixODBC's driver manager (make system-deps)
def test_azure_sql_is_signed_in_with_the_deployers_token_on_each_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token goes in the driver's access-token attribute (1256), asked for per connection; a
    driver that cannot connect is the orders database unavailable, which ``show`` reports."""
    import pyodbc  # noqa: PLC0415 - only this test needs the driver manager

    deployment = azd.Deployment(store_values(tmp_path / "c.pem"))
    credential = Recording()
    attempts: list[tuple[str, dict[str, Any]]] = []

    def connect(connection_string: str, **options: Any) -> Any:
        attempts.append((connection_string, options))
        raise pyodbc.InterfaceError("IM002", "[IM002] Data source name not found (no ODBC Driver 18)")

    monkeypatch.setattr(pyodbc, "connect", connect)
    repository = azure_profile.token_sql_orders_repository(
        deployment.store_settings, deployment.sql_connection_string, credential
    )
    assert attempts == [] and credential.asked == []  # built, not connected
    orders = azd._OrdersAsDeployer(repository)
    with pytest.raises(DependencyUnavailable, match=r"Azure SQL as the deployer: .*IM002"):
        orders.get("o-1")
    token = "tok".encode("utf-16-le")
    [(connection_string, options)] = attempts
    assert connection_string == deployment.sql_connection_string
    assert options["attrs_before"] == {1256: len(token).to_bytes(4, "little") + token}
    assert credential.asked == [("https://database.windows.net/.default",)]


def test_without_azd_on_path_the_error_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    code, text = ops("--azd", "smoke")
    assert (
        code == EXIT_USAGE and text.strip() == "ops: --azd needs the Azure Developer CLI: azd is not on PATH"
    )


def test_instances_on_another_durable_backend_is_not_supported_yet(tmp_path: Path, fake_azd: Any) -> None:
    fake_azd(values(tmp_path / "c.pem", DURABLE_BACKEND="durableTaskScheduler"))
    code, text = ops("--azd", "instances", "--name", "order_workflow_v1")
    assert code == EXIT_USAGE and "DURABLE_BACKEND is durableTaskScheduler: not supported yet" in text


def test_instances_needs_the_host_storage_account(tmp_path: Path, fake_azd: Any) -> None:
    fake_azd(values(tmp_path / "c.pem"))
    code, text = ops("--azd", "instances", "--name", "order_workflow_v1")
    assert code == EXIT_USAGE and "the azd environment has no AZURE_HOST_STORAGE_ACCOUNT_NAME" in text


def test_in_the_pipeline_the_sample_app_signs_in_with_the_jobs_oidc_token(tmp_path: Path) -> None:
    """GitHub's token endpoint played by a local server: asked for Entra's exchange audience with
    the job's bearer; no certificate is read."""
    import http.server  # noqa: PLC0415
    import json  # noqa: PLC0415
    import threading  # noqa: PLC0415

    asked: list[tuple[str, str | None]] = []

    class GitHub(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append((self.path, self.headers.get("Authorization")))
            body = json.dumps({"value": "the-jobs-oidc-token"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), GitHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        environ = {
            "SAS_SAMPLE_APP_FEDERATION": "github-actions",
            "ACTIONS_ID_TOKEN_REQUEST_URL": f"http://127.0.0.1:{server.server_port}/token?api-version=2.0",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "the-jobs-bearer",
        }
        deployment = azd.Deployment(values(tmp_path / "no-certificate.pem"))
        credential = deployment.sample_app_credential(environ)
        assert type(credential).__name__ == "ClientAssertionCredential"
        assert asked == []  # nothing asked before Entra's client needs it

        from ops import github_oidc  # noqa: PLC0415

        assert github_oidc.assertion(environ)() == "the-jobs-oidc-token"
        assert asked == [
            ("/token?api-version=2.0&audience=api%3A%2F%2FAzureADTokenExchange", "Bearer the-jobs-bearer")
        ]
    finally:
        server.shutdown()


def test_federation_outside_a_job_with_id_token_rights_is_a_one_line_error(tmp_path: Path) -> None:
    deployment = azd.Deployment(values(tmp_path / "no-certificate.pem"))
    with pytest.raises(BadArgument, match="permissions id-token: write"):
        deployment.sample_app_credential({"SAS_SAMPLE_APP_FEDERATION": "github-actions"})
