"""Metrics written to a JSON-lines file on each change (the local stand-in for Azure Monitor).

A periodic reader loses whatever changed since its last export when the process is killed
(SIGKILL runs no exit hook): the demo kills devhost and its workers mid-run, and the local page
then undercounted (issue 42: "Processed 58" transitions against 130 orders). Here each
measurement is followed by a collection written and flushed at once, so a count that reached the
file is never lost. Collecting the SDK's whole state on each change cost ~10 ms a measurement
here, so each measurement writes one line of its own instead: the OpenTelemetry JSON shape
(``resource_metrics`` → ``scope_metrics`` → ``metrics`` → ``data_points``) holding the one point
that changed, a counter's running total (cumulative, the SDK's default temporality) or a gauge's
value. A reader keeps the latest line per (file, process start, name, attributes).
Local only: Azure Monitor's exporter keeps its own periodic schedule.
"""

import json
import threading
import time
from typing import IO, Any

from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider

CUMULATIVE = 2  # AggregationTemporality.CUMULATIVE, as the SDK's JSON writes it
# The synchronous instruments this app uses, and the method that records on each.
RECORDING = {"create_counter": "add", "create_up_down_counter": "add", "create_gauge": "set"}


class ChangeLog:
    """The process's metrics file and its counters' running totals."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._lock = threading.Lock()  # one line at a time, totals in the order written
        self._totals: dict[tuple[str, str], float] = {}
        self._start = time.time_ns()  # tells this process's points from another's in a shared file

    def record(self, name: str, method: str, value: float, attributes: dict[str, Any] | None) -> None:
        attributes = dict(attributes or {})
        key = (name, json.dumps(attributes, sort_keys=True, default=str))
        with self._lock:
            data: dict[str, Any] = {}
            if method == "add":
                value = self._totals.get(key, 0) + value
                self._totals[key] = value
                data = {"aggregation_temporality": CUMULATIVE}
            point = {
                "attributes": attributes,
                "start_time_unix_nano": self._start,
                "time_unix_nano": time.time_ns(),
                "value": value,
            }
            metric = {"name": name, "data": {"data_points": [point], **data}}
            line = {"resource_metrics": [{"scope_metrics": [{"metrics": [metric]}]}]}
            self._out.write(json.dumps(line, default=str) + "\n")
            self._out.flush()

    def close(self) -> None:
        with self._lock:
            self._out.close()


class _Exporting:
    """An instrument whose every measurement is written before the call returns."""

    def __init__(self, instrument: Any, name: str, method: str, log: ChangeLog) -> None:
        self._instrument = instrument
        self._name = name
        self._method = method
        self._log = log
        setattr(self, method, self._measure)

    def _measure(
        self, amount: float, attributes: dict[str, Any] | None = None, *args: Any, **kwargs: Any
    ) -> None:
        getattr(self._instrument, self._method)(amount, attributes, *args, **kwargs)
        self._log.record(self._name, self._method, amount, attributes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._instrument, name)


class _ExportingMeter:
    def __init__(self, meter: Meter, log: ChangeLog) -> None:
        self._meter = meter
        self._log = log

    def __getattr__(self, name: str) -> Any:
        create = getattr(self._meter, name)
        method = RECORDING.get(name)
        if method is None:  # histograms and observable instruments: not used by this app
            return create

        def created(*args: Any, **kwargs: Any) -> _Exporting:
            instrument_name = str(kwargs.get("name", args[0] if args else ""))
            return _Exporting(create(*args, **kwargs), instrument_name, method, self._log)

        return created


class OnChangeMeterProvider(MeterProvider):
    """A MeterProvider whose meters write each measurement to ``log`` as it is made."""

    def __init__(self, log: ChangeLog, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._log = log

    def get_meter(self, *args: Any, **kwargs: Any) -> Any:
        return _ExportingMeter(super().get_meter(*args, **kwargs), self._log)

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        super().shutdown(*args, **kwargs)
        self._log.close()
