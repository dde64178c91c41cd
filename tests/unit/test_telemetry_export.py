"""Telemetry arrives once, and host sampling keeps what alerts count (adapters/telemetry_export.py).

In Azure the Functions host already sends the worker's log records to Application Insights, so
the Function App's worker must not install a log exporter of its own; the agent has no host and
must. Host sampling must not drop the rows the "Supervisor errors" alert counts."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters import telemetry_export
from harness.tools.host_config import HOST_JSON, sampling_excluded_types

ROOT = Path(__file__).resolve().parents[2]
ALERTS_BICEP = ROOT / "infra" / "modules" / "alerts.bicep"
# Nothing listens on port 9 of loopback: exports fail at once, nothing leaves the machine.
FAKE_CONNECTION_STRING = (
    "InstrumentationKey=00000000-0000-0000-0000-000000000000;"
    "IngestionEndpoint=http://127.0.0.1:9/;LiveEndpoint=http://127.0.0.1:9/"
)
# Application Insights tables and the sampling types that feed them.
TABLE_TYPES = {
    "requests": "Request",
    "exceptions": "Exception",
    "traces": "Trace",
    "dependencies": "Dependency",
    "customEvents": "Event",
    "pageViews": "PageView",
}


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """configure_azure_monitor replaced by a recorder of its arguments and of the environment the
    pinned distro reads its switches from; the process-wide 'configured once' flag reset."""
    import azure.monitor.opentelemetry as distro  # noqa: PLC0415 - patched, never configured

    calls: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> None:
        calls.append({"kwargs": kwargs, "logs_exporter": os.environ.get("OTEL_LOGS_EXPORTER")})

    monkeypatch.setattr(distro, "configure_azure_monitor", record)
    monkeypatch.setattr(telemetry_export, "_configured", False)
    monkeypatch.setenv("APPLICATIONINSIGHTS_CONNECTION_STRING", FAKE_CONNECTION_STRING)
    # Set, then removed: so that monkeypatch restores the variable configure() may set.
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "")
    monkeypatch.delenv("OTEL_LOGS_EXPORTER")
    return calls


def test_the_function_app_leaves_its_logs_to_the_functions_host(captured: list[dict[str, Any]]) -> None:
    where = telemetry_export.configure("function-app")
    assert len(captured) == 1
    assert captured[0]["logs_exporter"] == "none", "the worker would export every log row a second time"
    assert "disable_logging" not in captured[0]["kwargs"], "1.8.11 overwrites it: it would mislead"
    assert "Functions host sends the logs" in where


def test_the_agent_exports_its_own_logs(captured: list[dict[str, Any]]) -> None:
    where = telemetry_export.configure("agent")
    assert captured[0]["logs_exporter"] is None
    assert where == "Azure Monitor (traces, metrics and logs)"


def test_who_ships_the_logs_can_be_said_explicitly(captured: list[dict[str, Any]]) -> None:
    telemetry_export.configure("agent", host_ships_logs=True)
    assert captured[0]["logs_exporter"] == "none"


def test_an_operators_own_logs_exporter_setting_is_kept(
    captured: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "console")
    telemetry_export.configure("function-app")
    assert captured[0]["logs_exporter"] == "console"


def _configure_in_a_fresh_process(service: str, tmp_path: Path) -> dict[str, Any]:
    """The real pinned distro, in its own process (OpenTelemetry's providers are process-wide)."""
    script = (
        "import json, logging\n"
        "from opentelemetry import _logs, metrics, trace\n"
        "from adapters import telemetry_export\n"
        f"where = telemetry_export.configure({service!r})\n"
        "print(json.dumps({'where': where,\n"
        "    'logger_provider': type(_logs.get_logger_provider()).__name__,\n"
        "    'tracer_provider': type(trace.get_tracer_provider()).__name__,\n"
        "    'meter_provider': type(metrics.get_meter_provider()).__name__,\n"
        "    'root_handlers': [type(h).__name__ for h in logging.getLogger().handlers]}))\n"
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "APPLICATIONINSIGHTS_", "PYTHON_APPLICATIONINSIGHTS_"))
    }
    env |= {
        "APPLICATIONINSIGHTS_CONNECTION_STRING": FAKE_CONNECTION_STRING,
        "APPLICATIONINSIGHTS_STATSBEAT_DISABLED_ALL": "true",
        "APPLICATIONINSIGHTS_CONTROLPLANE_DISABLED": "true",
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(tmp_path),  # the exporter's retry storage
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.processes  # a fresh interpreter, so the distro configures from scratch
def test_with_the_pinned_distro_the_function_app_installs_no_log_exporter(tmp_path: Path) -> None:
    state = _configure_in_a_fresh_process("function-app", tmp_path)
    assert state["tracer_provider"] == "TracerProvider"
    assert state["meter_provider"] == "MeterProvider"
    assert state["logger_provider"] == "ProxyLoggerProvider", "an SDK LoggerProvider was installed"
    assert "LoggingHandler" not in state["root_handlers"]


@pytest.mark.processes  # a fresh interpreter, so the distro configures from scratch
def test_with_the_pinned_distro_the_agent_installs_its_log_exporter(tmp_path: Path) -> None:
    state = _configure_in_a_fresh_process("agent", tmp_path)
    assert state["logger_provider"] == "LoggerProvider"
    assert "LoggingHandler" in state["root_handlers"]


def _alerted_types() -> set[str]:
    """Sampling types of the tables the log alert rules in infra query."""
    queries = re.findall(r"query:\s*'([^']*)'", ALERTS_BICEP.read_text())
    assert queries, f"no log alert query found in {ALERTS_BICEP}"
    tables = {word for query in queries for word in re.findall(r"\b\w+\b", query)} & set(TABLE_TYPES)
    assert tables, queries
    return {TABLE_TYPES[table] for table in tables}


def test_host_sampling_keeps_every_row_the_alert_rules_count() -> None:
    host = json.loads((ROOT / HOST_JSON).read_text())
    excluded = sampling_excluded_types(host)
    alerted = _alerted_types()
    assert {"Exception", "Trace"} <= alerted  # "Supervisor errors": exceptions and error traces
    if excluded is not None:  # None: sampling is off, nothing is dropped
        assert alerted | {"Request"} <= excluded, f"sampled away: {sorted(alerted - excluded)}"


def test_the_host_stays_in_application_insights_mode() -> None:
    """OpenTelemetry mode would change which process ships the logs (and the rows' shape): it is
    a different design, not a switch (adapters/telemetry_export.py says why it was not chosen)."""
    host = json.loads((ROOT / HOST_JSON).read_text())
    assert host.get("telemetryMode", "ApplicationInsights") == "ApplicationInsights"
