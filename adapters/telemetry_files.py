"""Metrics written to a JSON-lines file on each change (the local stand-in for Azure Monitor).

A periodic reader loses whatever changed since its last export when the process is killed
(SIGKILL runs no exit hook): the demo kills devhost and its workers mid-run, and the local page
then undercounted (issue 42: "Processed 58" transitions against 130 orders). Here each
measurement is followed by a collection written and flushed at once, so a count that reached the
file is never lost. Each line is the OpenTelemetry JSON of a whole collection (cumulative, the
SDK's default), as ``ConsoleMetricExporter`` writes it: a reader keeps the latest line per point.
Local only: Azure Monitor's exporter keeps its own periodic schedule.
"""

import threading
from typing import IO, Any

from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, MetricsData

# The synchronous instruments and the method that records a measurement on each.
RECORDING = {"create_counter": "add", "create_up_down_counter": "add", "create_histogram": "record"}
RECORDING |= {"create_gauge": "set"}


class OnChangeReader(MetricReader):
    """Collects on demand (``export_now``) and appends each collection as one line."""

    def __init__(self, out: IO[str]) -> None:
        super().__init__()
        self._out = out
        # One collection at a time, written in the order taken: a later line never holds an
        # older cumulative value than the line before it.
        self._lock = threading.Lock()

    def export_now(self) -> None:
        with self._lock:
            self.collect()

    def _receive_metrics(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **_: Any) -> None:
        self._out.write(metrics_data.to_json(indent=None) + "\n")
        self._out.flush()

    def shutdown(self, timeout_millis: float = 30_000, **_: Any) -> None:
        with self._lock:
            self._out.close()


class _Exporting:
    """An instrument whose every measurement is exported before the call returns."""

    def __init__(self, instrument: Any, method: str, reader: OnChangeReader) -> None:
        self._instrument = instrument
        self._method = getattr(instrument, method)
        self._reader = reader
        setattr(self, method, self._measure)

    def _measure(self, *args: Any, **kwargs: Any) -> None:
        self._method(*args, **kwargs)
        self._reader.export_now()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._instrument, name)


class _ExportingMeter:
    def __init__(self, meter: Meter, reader: OnChangeReader) -> None:
        self._meter = meter
        self._reader = reader

    def __getattr__(self, name: str) -> Any:
        create = getattr(self._meter, name)
        method = RECORDING.get(name)
        if method is None:  # observable instruments are read at collection time: nothing to add
            return create

        def created(*args: Any, **kwargs: Any) -> _Exporting:
            return _Exporting(create(*args, **kwargs), method, self._reader)

        return created


class OnChangeMeterProvider(MeterProvider):
    """A MeterProvider whose meters export on each measurement through ``reader``."""

    def __init__(self, reader: OnChangeReader, **kwargs: Any) -> None:
        super().__init__(metric_readers=[reader], **kwargs)
        self._reader = reader

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        return _ExportingMeter(super().get_meter(*args, **kwargs), self._reader)
