"""Where telemetry goes, once per process: Azure Monitor when APPLICATIONINSIGHTS_CONNECTION_STRING
is set (with Entra auth configured by the platform), else JSON-lines files under SAS_TELEMETRY_DIR
when that is set, else nowhere (the API stays a no-op).

Each row arrives once. The Function App runs inside the Functions host, which already sends every
log record of the worker to Application Insights (its default Application Insights mode, with
``operation_Name`` set to the function, which the "Supervisor errors" alert filters on). A
second exporter in the worker would write each log row again, so there the worker exports only
its own spans and metrics, which the host never sees. The agent (a Container App) has no host:
it exports traces, metrics and logs. The host's own sampling must not drop what alerts count:
host.json excludes Request, Exception and Trace from adaptive sampling (checked by
harness/tools/host_config.py). Why not the host's OpenTelemetry mode (``"telemetryMode":
"OpenTelemetry"``): it is in preview, supports only HTTP, Service Bus and Event Hubs triggers (the
Supervisor is a timer, activities are Durable), drops the portal's log stream and invocation
traces, and changes the shape of the rows the alert query reads (Microsoft Learn, "Use
OpenTelemetry with Azure Functions")."""

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from opentelemetry import metrics, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from adapters.telemetry_files import ChangeLog, OnChangeMeterProvider

_lock = threading.Lock()
_configured = False

# Services that run inside a Functions host, whose host ships their log records (see above).
FUNCTIONS_HOSTED = frozenset({"function-app"})
# The pinned distro (azure-monitor-opentelemetry 1.8.11) takes no working ``disable_logging``
# argument: _get_configurations overwrites it from this variable, and "none" skips its logging
# pipeline (no LoggerProvider, no handler on the root logger). An operator's own value is kept:
# anything but "none" brings the worker's log exporter back, and with it every log row twice.
LOGS_EXPORTER_VARIABLE = "OTEL_LOGS_EXPORTER"


class JsonLinesSpanExporter(SpanExporter):
    """One compact JSON object per span, appended to a file: easy to grep and to load."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            for span in spans:
                self._file.write(json.dumps(json.loads(span.to_json())) + "\n")
            self._file.flush()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._file.close()


def configure(service: str, *, host_ships_logs: bool | None = None) -> str:
    """Set up exporters for this process; returns where telemetry goes. Safe to call repeatedly.

    ``host_ships_logs`` says a Functions host already sends this process's log records to
    Application Insights; by default, whether ``service`` is in ``FUNCTIONS_HOSTED``.
    """
    global _configured  # noqa: PLW0603 - providers are process-wide by design in OpenTelemetry
    with _lock:
        if _configured:
            return "already configured"
        _configured = True
        resource = Resource.create({"service.name": service})
        if os.environ.get("APPLICATIONINSIGHTS_CONNECTION_STRING"):
            from azure.monitor.opentelemetry import configure_azure_monitor  # noqa: PLC0415 - Azure only

            hosted = service in FUNCTIONS_HOSTED if host_ships_logs is None else host_ships_logs
            if hosted:
                os.environ.setdefault(LOGS_EXPORTER_VARIABLE, "none")
            configure_azure_monitor(resource=resource)
            if hosted:
                return "Azure Monitor (traces and metrics; the Functions host sends the logs)"
            return "Azure Monitor (traces, metrics and logs)"
        directory = os.environ.get("SAS_TELEMETRY_DIR")
        if not directory:
            return "nowhere (set SAS_TELEMETRY_DIR or APPLICATIONINSIGHTS_CONNECTION_STRING)"
        folder = Path(directory)
        tracer_provider = TracerProvider(resource=resource)
        # Each span written as it ends, and each metric as it changes (adapters/telemetry_files.py):
        # a killed process loses none of what it counted.
        tracer_provider.add_span_processor(
            SimpleSpanProcessor(JsonLinesSpanExporter(folder / f"{service}.spans.jsonl"))
        )
        trace.set_tracer_provider(tracer_provider)
        folder.mkdir(parents=True, exist_ok=True)
        log = ChangeLog((folder / f"{service}.metrics.jsonl").open("a", encoding="utf-8"))
        metrics.set_meter_provider(OnChangeMeterProvider(log, resource=resource))
        return f"files in {folder}"
