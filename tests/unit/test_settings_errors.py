"""Every wrong setting is a ``SettingsError``: the app and its tools report it as one line naming
what to fix, never a traceback. Shown through ``ops``, as an operator meets it, and on the Azure
SQL connection string, which the azure profile checks before it opens anything."""

import io
from pathlib import Path

import pytest
from rich.console import Console

from adapters.azure_profile import azure_sql_connection_string
from ops.cli import EXIT_USAGE, main
from settings import Settings, SettingsError

# Settings another test's app directory may have left in this process's environment.
LEAKED = (
    "ServiceBusConnection",
    "CosmosDBConnection",
    "CosmosDBConnection__accountEndpoint",
    "SqlConnection",
)
AZURE = {
    "SAS_PROFILE": "azure",
    "ServiceBusConnection__fullyQualifiedNamespace": "sb-x.servicebus.windows.net",
}


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"SAS_PROFILE": "azure", "ServiceBusConnection": "local"}, "the azure profile needs Service Bus"),
        (AZURE, "set CosmosDBConnection__accountEndpoint (azure)"),
    ],
)
def test_a_wrong_setting_is_one_line_from_ops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], says: str
) -> None:
    for name in LEAKED:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    out = io.StringIO()
    code = main(["list", "--app-dir", str(tmp_path)], Console(file=out, width=300))
    text = out.getvalue().strip()
    assert code == EXIT_USAGE, text
    assert len(text.splitlines()) == 1 and text.startswith("ops: ") and says in text, text


@pytest.mark.parametrize(
    ("connection", "says"),
    [
        ("Server=tcp:x;Pwd=hunter2", "SqlConnection must not hold a password"),
        ("Server=tcp:x;Encrypt=no", "must not turn encryption off"),
        ("not an odbc string", "SqlConnection is not an ODBC connection string"),
        ("Server=tcp:x", "set AZURE_CLIENT_ID"),
    ],
)
def test_a_wrong_azure_sql_connection_is_a_settings_error(connection: str, says: str) -> None:
    settings = Settings.from_env({**AZURE, "SqlConnection": connection})
    with pytest.raises(SettingsError, match=says) as raised:
        azure_sql_connection_string(settings)
    assert "hunter2" not in str(raised.value)
