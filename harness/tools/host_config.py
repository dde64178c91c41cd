"""Check ``host.json`` and the shipped ``local.settings.*.json`` against the rules Azure applies.

``python -m harness.tools.host_config [ROOT]`` prints every problem and exits 1 if there is one; the unit
tests (``tests/unit/test_host_json.py``, run by ``make test``) call the same functions.

host.json is validated with ``jsonschema`` against ``HOST_SCHEMA``: an excerpt of the published
host.json schema (SchemaStore, https://json.schemastore.org/host.json; source file
``src/schemas/json/host.json`` of SchemaStore/schemastore at commit
0345caa33d4def191427aa18e113de4c5d6f523b, read 2026-11-30), vendored because schemastore.org is
out of reach when the tests run. The schema's root is ``oneOf`` three shapes; the excerpt keeps
the one this app can use, ``version-2-ext-5`` (extension bundle 4.x and later, Service Bus
extension 5.x; ``version-1`` has no ``version`` key and ``version-2`` no ``clientRetryOptions``).
Its rules (types, enums, TimeSpan patterns, ``required`` and ``additionalProperties``) are
kept as published for every section this app configures (``version``, ``extensionBundle``,
``logging``, ``functionTimeout``, ``retry`` and ``extensions.http``/``serviceBus``/
``durableTask``); descriptions and defaults are dropped, and sections the app does not use keep
only their name and JSON type, so a key the schema does not know still fails. Two published
patterns matter here: ``clientRetryOptions.mode`` is the enum ``exponential``/``fixed`` (lower
case), and ``clientRetryOptions.delay`` must be ``hh:mm:ss.ff`` with exactly two fractional digits
(every other TimeSpan is ``hh:mm:ss`` with none). To refresh: diff the excerpt against the schema.

``HOST_RULES`` add what the schema leaves as free strings but the host parses: the bundle id and
its version range, and the sampling rule the alerts depend on (``UNSAMPLED_TYPES``).

local.settings files are checked against ``LOCAL_SETTINGS_SCHEMA``, the model Core Tools reads
them into (``AppSettingsFile`` in Azure/azure-functions-core-tools: ``IsEncrypted`` bool,
``Values`` string→string, ``ConnectionStrings``, ``Host``) and its documented rules (Microsoft
Learn, "Develop Azure Functions locally", Local settings file: values must be strings, not JSON
objects or arrays; names shouldn't include a colon; ``AzureWebJobsStorage`` is required for
triggers other than HTTP; ``FUNCTIONS_WORKER_RUNTIME`` names the worker). Core Tools deserializes
the whole file at once and, when that fails (a nested object under ``Values``), silently carries
on with **no settings at all**, which is why this is checked rather than found out at run time.
"""

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator, Draft202012Validator  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]
HOST_JSON = "host.json"
LOCAL_SETTINGS_FILES = ("local.settings.sample.json", "local.settings.embedded.json")

# --- host.json: the published schema's rules (excerpt, see the module docstring) ---------------

# SchemaStore's TimeSpan patterns: "hh:mm:ss" everywhere, "hh:mm:ss.ff" for the retry delays.
TIMESPAN = r"^(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d$"
TIMESPAN_FRACTION = r"^(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d\d$"
LOG_LEVELS = ["Critical", "Debug", "Error", "Information", "None", "Trace", "Warning"]

_TIMESPAN_OR_NULL = {"oneOf": [{"type": "string", "pattern": TIMESPAN}, {"enum": [None]}]}

_HTTP = {
    "type": "object",
    "required": ["routePrefix"],
    "properties": {
        "routePrefix": {"type": "string"},
        "maxConcurrentRequests": {"type": "integer"},
        "maxOutstandingRequests": {"type": "integer"},
        "dynamicThrottlesEnabled": {"type": "boolean"},
        "hsts": {"type": "object"},
        "customHeaders": {"type": "object"},
    },
    "additionalProperties": False,
}

_SERVICE_BUS = {
    "type": "object",
    "properties": {
        "clientRetryOptions": {
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["exponential", "fixed"]},
                "tryTimeout": {"type": "string", "pattern": TIMESPAN},
                "delay": {"type": "string", "pattern": TIMESPAN_FRACTION},
                "maxDelay": {"type": "string", "pattern": TIMESPAN},
                "maxRetries": {"type": "integer"},
            },
        },
        "prefetchCount": {"type": "integer"},
        "transportType": {"type": "string", "enum": ["amqpTcp", "amqpWebSockets"]},
        "webProxy": {"type": "string"},
        "autoCompleteMessages": {"type": "boolean"},
        "maxAutoLockRenewalDuration": {"type": "string", "pattern": TIMESPAN},
        "maxConcurrentCalls": {"type": "integer"},
        "maxConcurrentSessions": {"type": "integer"},
        "maxMessageBatchSize": {"type": "integer"},
        "maxBatchWaitTime": {"type": "string", "pattern": TIMESPAN},
        "sessionIdleTimeout": {"type": "string", "pattern": TIMESPAN},
        "enableCrossEntityTransactions": {"type": "boolean"},
    },
    "additionalProperties": False,
}

_DURABLE_TASK = {
    "type": "object",
    "properties": {
        "hubName": {"type": "string"},
        "storageProvider": {
            "type": "object",
            "properties": {
                "connectionStringName": {"type": "string"},
                "controlQueueBatchSize": {"type": "integer"},
                "controlQueueBufferThreshold": {"type": "integer"},
                "controlQueueVisibilityTimeout": {"type": "string"},
                "maxQueuePollingInterval": {"type": "string"},
                "partitionCount": {"type": "integer"},
                "trackingStoreConnectionStringName": {"type": "string"},
                "trackingStoreNamePrefix": {"type": "string"},
                "useLegacyPartitionManagement": {"type": "boolean"},
                "workItemQueueVisibilityTimeout": {"type": "string"},
            },
            "additionalProperties": False,
        },
        "tracing": {
            "type": "object",
            "properties": {
                "traceInputsAndOutputs": {"type": "boolean"},
                "traceReplayEvents": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        "notifications": {"type": "object"},
        "maxConcurrentActivityFunctions": {"type": "integer"},
        "maxConcurrentOrchestratorFunctions": {"type": "integer"},
        "extendedSessionsEnabled": {"type": "boolean"},
        "extendedSessionIdleTimeoutInSeconds": {"type": "integer"},
        "useAppLease": {"type": "boolean"},
        "useGracefulShutdown": {"type": "boolean"},
        "maxEntityOperationBatchSize": {"type": "integer"},
        "useTablePartitionManagement": {"type": "boolean"},
    },
    "additionalProperties": False,
}

_APPLICATION_INSIGHTS = {
    "type": "object",
    "properties": {
        "samplingSettings": {
            "type": "object",
            "properties": {
                "isEnabled": {"type": "boolean"},
                "maxTelemetryItemsPerSecond": {"type": "integer"},
                "evaluationInterval": {"pattern": TIMESPAN},
                "initialSamplingPercentage": {"type": "number"},
                "samplingPercentageIncreaseTimeout": {"pattern": TIMESPAN},
                "samplingPercentageDecreaseTimeout": {"pattern": TIMESPAN},
                "minSamplingPercentage": {"type": "number"},
                "maxSamplingPercentage": {"type": "number"},
                "movingAverageRatio": {"type": "number"},
                "excludedTypes": {"type": "string"},
                "includedTypes": {"type": "string"},
            },
        },
        "enableLiveMetrics": {"type": "boolean"},
        "enableLiveMetricsFilters": {"type": "boolean"},
        "enableDependencyTracking": {"type": "boolean"},
        "enablePerformanceCountersCollection": {"type": "boolean"},
        "httpAutoCollectionOptions": {
            "type": "object",
            "properties": {
                "enableHttpTriggerExtendedInfoCollection": {"type": "boolean"},
                "enableW3CDistributedTracing": {"type": "boolean"},
                "enableResponseHeaderInjection": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        "snapshotConfiguration": {"type": "object"},
    },
    "additionalProperties": False,
}

HOST_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "title": "host.json (excerpt of https://json.schemastore.org/host.json, definitions/version-2-ext-5)",
    "type": "object",
    "properties": {
        "version": {"enum": ["2.0"]},
        "extensionBundle": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "version": {"type": "string"}},
            "additionalProperties": False,
        },
        "logging": {
            "type": "object",
            "properties": {
                "logLevel": {
                    "type": "object",
                    "properties": {"default": {"enum": LOG_LEVELS}},
                    "additionalProperties": {"enum": LOG_LEVELS},
                },
                "applicationInsights": _APPLICATION_INSIGHTS,
                "fileLoggingMode": {"enum": ["never", "always", "debugOnly"]},
            },
        },
        "functionTimeout": {
            "oneOf": [
                {"type": "string", "pattern": r"^(-1|(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d)$"},
                {"enum": [None]},
            ]
        },
        "retry": {
            "type": "object",
            "properties": {
                "strategy": {"enum": ["exponentialBackoff", "fixedDelay"]},
                "maxRetryCount": {"type": "integer"},
                "delayInterval": _TIMESPAN_OR_NULL,
                "minimumInterval": _TIMESPAN_OR_NULL,
                "maximumInterval": _TIMESPAN_OR_NULL,
            },
        },
        "extensions": {
            "type": "object",
            "properties": {
                "http": _HTTP,
                "serviceBus": _SERVICE_BUS,
                "durableTask": _DURABLE_TASK,
                # Not used by this app: names and types only (rules not vendored).
                "queues": {"type": "object"},
                "sendGrid": {"type": "object"},
                "eventHubs": {"type": "object"},
                "cosmosDB": {"type": "object"},
                "blobs": {"type": "object"},
            },
        },
        # Not used by this app: names and types only (rules not vendored).
        "aggregator": {"type": "object"},
        "functions": {"type": "array"},
        "healthMonitor": {"type": "object"},
        "languageWorker": {"type": "object"},
        "managedDependency": {"type": "object"},
        "customHandler": {"type": "object"},
        "singleton": {"type": "object"},
        "watchDirectories": {"type": "array"},
        "watchFiles": {"type": "array"},
        "concurrency": {"type": "object"},
        "sendCanceledInvocationsToWorker": {"type": "boolean"},
    },
    "required": ["version"],
    "additionalProperties": False,
}

# --- host.json: what the schema leaves free but the host parses ---------------------------------

BUNDLE_IDS = (
    "Microsoft.Azure.Functions.ExtensionBundle",
    "Microsoft.Azure.Functions.ExtensionBundle.Preview",
)
# A NuGet version range as the templates write it: "[4.*, 5.0.0)".
BUNDLE_RANGE = re.compile(r"^\[\d+\.\*, ?\d+\.\d+\.\d+\)$")
# Types host sampling must never drop. infra/modules/alerts.bicep "Supervisor errors" counts
# exceptions and error traces; Request is the host's own default exclusion, kept. Adaptive
# sampling works per type, not per severity, so an error trace is only safe if Trace is excluded.
UNSAMPLED_TYPES = ("Request", "Exception", "Trace")
SAMPLING_TYPES = ("Dependency", "Event", "Exception", "PageView", "Request", "Trace")


def sampling_excluded_types(host: dict[str, Any]) -> set[str] | None:
    """Types host sampling never drops; ``None`` when sampling is off (nothing is dropped)."""
    settings: Any = host
    for key in ("logging", "applicationInsights", "samplingSettings"):
        settings = settings.get(key) if isinstance(settings, dict) else None
    if not isinstance(settings, dict):
        settings = {}
    if settings.get("isEnabled", True) is False:
        return None
    listed = settings.get("excludedTypes")
    if listed is None:
        return {"Request"}  # the host's default
    return {part.strip() for part in str(listed).split(";") if part.strip()}


def _host_rules(host: dict[str, Any]) -> Iterator[str]:
    bundle = host.get("extensionBundle")
    if not isinstance(bundle, dict):
        yield "extensionBundle: missing (the app's triggers come from the extension bundle)"
    else:
        if bundle.get("id") not in BUNDLE_IDS:
            yield f"extensionBundle.id: {bundle.get('id')!r} is not one of {list(BUNDLE_IDS)}"
        if not BUNDLE_RANGE.match(str(bundle.get("version", ""))):
            yield f"extensionBundle.version: {bundle.get('version')!r} is not a range like '[4.*, 5.0.0)'"
    excluded = sampling_excluded_types(host)
    if excluded is not None:
        unknown = sorted(excluded - set(SAMPLING_TYPES))
        if unknown:
            yield f"logging.applicationInsights.samplingSettings.excludedTypes: unknown types {unknown}"
        missing = [t for t in UNSAMPLED_TYPES if t not in excluded]
        if missing:
            yield (
                "logging.applicationInsights.samplingSettings.excludedTypes: "
                f"{missing} can be sampled away (the alert rules count exceptions and error traces)"
            )


# --- local.settings.json: the model Core Tools reads (see the module docstring) ----------------

LOCAL_SETTINGS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "local.settings.json as Azure Functions Core Tools reads it (AppSettingsFile)",
    "type": "object",
    "properties": {
        "IsEncrypted": {"type": "boolean"},
        "Values": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "properties": {"FUNCTIONS_WORKER_RUNTIME": {"const": "python"}},
            "required": ["FUNCTIONS_WORKER_RUNTIME", "AzureWebJobsStorage"],
        },
        "Host": {
            "type": "object",
            "properties": {
                "LocalHttpPort": {"type": "integer", "minimum": 1, "maximum": 65535},
                "CORS": {"type": "string"},
                "CORSCredentials": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        "ConnectionStrings": {
            "type": "object",
            "additionalProperties": {
                "oneOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "properties": {
                            "ConnectionString": {"type": "string"},
                            "ProviderName": {"type": "string"},
                        },
                        "required": ["ConnectionString"],
                        "additionalProperties": False,
                    },
                ]
            },
        },
    },
    "required": ["IsEncrypted", "Values"],
    "additionalProperties": False,
}

_HOST_VALIDATOR = Draft4Validator(HOST_SCHEMA)
_LOCAL_VALIDATOR = Draft202012Validator(LOCAL_SETTINGS_SCHEMA)


def _schema_problems(validator: Any, document: object) -> list[str]:
    problems = []
    for error in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path))):
        where = ".".join(str(part) for part in error.absolute_path) or "(root)"
        problems.append(f"{where}: {error.message}")
    return problems


def check_host(host: object) -> list[str]:
    """Problems with a parsed host.json; empty when it conforms."""
    problems = _schema_problems(_HOST_VALIDATOR, host)
    if isinstance(host, dict):
        problems += list(_host_rules(host))
    return problems


def check_local_settings(settings: object) -> list[str]:
    """Problems with a parsed local.settings file meant to be shipped; empty when it conforms."""
    problems = _schema_problems(_LOCAL_VALIDATOR, settings)
    if not isinstance(settings, dict):
        return problems
    if settings.get("IsEncrypted") is True:
        problems.append("IsEncrypted: true means encrypted with one machine's key: it cannot be shipped")
    values = settings.get("Values")
    # Double underscores stay allowed on purpose: identity-based connections need them
    # (ServiceBusConnection__fullyQualifiedNamespace) and the host reads them as sections.
    for name in values if isinstance(values, dict) else ():
        if ":" in name:
            problems.append(f"Values.{name}: a setting name shouldn't contain ':' (write '__' for a section)")
    return problems


class DuplicateKeyError(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKeyError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def load(path: Path) -> object:
    """Parse JSON, refusing duplicate keys (the last one would silently win)."""
    return json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_no_duplicates)


def check_file(path: Path, check: Any) -> list[str]:
    try:
        document = load(path)
    except (OSError, ValueError) as error:
        return [f"{path.name}: {error}"]
    return [f"{path.name}: {problem}" for problem in check(document)]


def check_repo(root: Path = ROOT) -> list[str]:
    problems = check_file(root / HOST_JSON, check_host)
    for name in LOCAL_SETTINGS_FILES:
        problems += check_file(root / name, check_local_settings)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check host.json and the shipped local.settings files.")
    parser.add_argument("root", nargs="?", type=Path, default=ROOT, help="the app's folder")
    args = parser.parse_args(argv)
    problems = check_repo(args.root)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
