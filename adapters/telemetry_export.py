"""Where telemetry goes, once per process: Azure Monitor when APPLICATIONINSIGHTS_CONNECTION_STRING
is set (traces, metrics and logs, with Entra auth configured by the platform), else JSON-lines
files under SAS_TELEMETRY_DIR when that is set, else nowhere (the API stays a no-op)."""

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

_lock = threading.Lock()
_configured = False


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


def configure(service: str) -> str:
    """Set up exporters for this process; returns where telemetry goes. Safe to call repeatedly."""
    global _configured  # noqa: PLW0603 - providers are process-wide by design in OpenTelemetry
    with _lock:
        if _configured:
            return "already configured"
        _configured = True
        resource = Resource.create({"service.name": service})
        if os.environ.get("APPLICATIONINSIGHTS_CONNECTION_STRING"):
            from azure.monitor.opentelemetry import configure_azure_monitor  # noqa: PLC0415 - Azure only

            configure_azure_monitor(resource=resource)
            return "Azure Monitor"
        directory = os.environ.get("SAS_TELEMETRY_DIR")
        if not directory:
            return "nowhere (set SAS_TELEMETRY_DIR or APPLICATIONINSIGHTS_CONNECTION_STRING)"
        folder = Path(directory)
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(
            BatchSpanProcessor(JsonLinesSpanExporter(folder / f"{service}.spans.jsonl"))
        )
        trace.set_tracer_provider(tracer_provider)
        metrics_file = (folder / f"{service}.metrics.jsonl").open("a", encoding="utf-8")
        reader = PeriodicExportingMetricReader(
            ConsoleMetricExporter(out=metrics_file, formatter=lambda m: m.to_json(indent=None) + "\n"),
            export_interval_millis=10_000,
        )
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))
        return f"files in {folder}"
