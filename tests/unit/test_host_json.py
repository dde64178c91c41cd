"""host.json and the shipped local.settings files follow the rules Azure applies to them
(``harness/tools/host_config.py``: the published host.json schema's rules, vendored, and the model Core
Tools reads local.settings.json into), and the checker catches each way of breaking them."""

import copy
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft4Validator, Draft202012Validator  # type: ignore[import-untyped]

from harness.tools import host_config
from harness.tools.host_config import (
    HOST_JSON,
    HOST_SCHEMA,
    LOCAL_SETTINGS_FILES,
    LOCAL_SETTINGS_SCHEMA,
    TIMESPAN,
    TIMESPAN_FRACTION,
    check_host,
    check_local_settings,
    check_repo,
)

ROOT = Path(__file__).resolve().parents[2]
HOST = json.loads((ROOT / HOST_JSON).read_text())
SAMPLE = json.loads((ROOT / "local.settings.sample.json").read_text())

Mutation = Callable[[dict[str, Any]], None]


def mutated(document: dict[str, Any], change: Mutation) -> dict[str, Any]:
    changed = copy.deepcopy(document)
    change(changed)
    return changed


def service_bus(host: dict[str, Any]) -> dict[str, Any]:
    section: dict[str, Any] = host["extensions"]["serviceBus"]
    return section


def retry_options(host: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = service_bus(host)["clientRetryOptions"]
    return options


def test_the_vendored_schemas_are_valid_schemas() -> None:
    Draft4Validator.check_schema(HOST_SCHEMA)
    Draft202012Validator.check_schema(LOCAL_SETTINGS_SCHEMA)


def test_the_shipped_files_conform() -> None:
    assert check_repo(ROOT) == []


def test_the_command_line_checks_the_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert host_config.main([str(ROOT)]) == 0
    for name in (HOST_JSON, *LOCAL_SETTINGS_FILES):
        shutil.copy(ROOT / name, tmp_path / name)
    host = mutated(HOST, lambda h: retry_options(h).update(mode="Exponential"))
    (tmp_path / HOST_JSON).write_text(json.dumps(host))
    assert host_config.main([str(tmp_path)]) == 1
    assert "clientRetryOptions.mode: 'Exponential'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # The two findings of the conformance issue, put back.
        (lambda h: retry_options(h).update(mode="Exponential"), "clientRetryOptions.mode"),
        (lambda h: retry_options(h).update(delay="00:00:00.500"), "clientRetryOptions.delay"),
        # The retry delay has exactly two fractional digits; every other TimeSpan has none.
        (lambda h: retry_options(h).update(delay="00:00:00.5"), "clientRetryOptions.delay"),
        (lambda h: retry_options(h).update(delay="00:00:01"), "clientRetryOptions.delay"),
        (lambda h: retry_options(h).update(maxDelay="00:00:10.00"), "clientRetryOptions.maxDelay"),
        (lambda h: retry_options(h).update(maxRetries="2"), "clientRetryOptions.maxRetries"),
        (lambda h: service_bus(h).update(maxAutoLockRenewalDuration="5m"), "LockRenewalDuration"),
        (lambda h: service_bus(h).update(maxAutoLockRenewalDuration="24:00:00"), "LockRenewalDuration"),
        # Keys the schema does not know, under the sections this app configures.
        (lambda h: service_bus(h).update(maxConcurrentCall=8), "maxConcurrentCall"),
        (lambda h: service_bus(h).update(autoComplete=True), "autoComplete"),  # the 4.x name
        (lambda h: h["extensions"]["durableTask"].update(maxConcurrentActivities=8), "ConcurrentActivities"),
        (lambda h: h["extensions"]["http"].update(prefix="api"), "prefix"),
        (lambda h: h["extensions"]["http"].pop("routePrefix"), "routePrefix"),
        (lambda h: h.update(telemetryMode="OpenTelemetry"), "telemetryMode"),
        (lambda h: h.update(version="2"), "version"),
        (lambda h: h["logging"]["logLevel"].update(default="Info"), "logging.logLevel.default"),
        (lambda h: h.update(functionTimeout="00:10"), "functionTimeout"),
        # What the schema leaves free but the host parses.
        (lambda h: h["extensionBundle"].update(version="4.*"), "extensionBundle.version"),
        (lambda h: h["extensionBundle"].update(id="Microsoft.Azure.Functions.Bundle"), "extensionBundle.id"),
        (lambda h: h.pop("extensionBundle"), "extensionBundle"),
    ],
)
def test_each_way_of_breaking_host_json_is_caught(change: Mutation, expected: str) -> None:
    problems = check_host(mutated(HOST, change))
    assert any(expected in problem for problem in problems), problems


def _timespans(document: object, schema: dict[str, Any], where: str = "") -> list[tuple[str, str, Any]]:
    """Every string that looks like a TimeSpan, with the excerpt's rule for its key (if any)."""
    found: list[tuple[str, str, Any]] = []
    if isinstance(document, dict):
        for key, value in document.items():
            child = schema.get("properties", {}).get(key, {})
            found += _timespans(value, child, f"{where}.{key}".lstrip("."))
    elif isinstance(document, str) and re.match(r"^\d+:\d+", document):
        found.append((where, document, schema.get("pattern")))
    return found


def test_every_timespan_in_host_json_is_checked_by_a_schema_pattern() -> None:
    timespans = _timespans(HOST, HOST_SCHEMA)
    assert {where for where, _, _ in timespans} >= {
        "extensions.serviceBus.maxAutoLockRenewalDuration",
        "extensions.serviceBus.clientRetryOptions.delay",
        "extensions.serviceBus.clientRetryOptions.maxDelay",
    }
    for where, value, pattern in timespans:
        assert pattern in (TIMESPAN, TIMESPAN_FRACTION), f"{where}: no TimeSpan pattern vendored for it"
        assert re.match(pattern, value), f"{where}: {value!r} does not match {pattern}"


def test_sampling_may_be_off_but_not_on_for_what_alerts_count() -> None:
    def sampling(settings: dict[str, Any]) -> Mutation:
        return lambda h: h["logging"]["applicationInsights"].update(samplingSettings=settings)

    assert check_host(mutated(HOST, sampling({"isEnabled": False}))) == []
    for settings in ({"isEnabled": True}, {"isEnabled": True, "excludedTypes": "Request;Exception"}):
        problems = check_host(mutated(HOST, sampling(settings)))
        assert any("can be sampled away" in problem for problem in problems), settings
    problems = check_host(mutated(HOST, sampling({"excludedTypes": "Request;Exception;Trace;Traces"})))
    assert any("unknown types ['Traces']" in problem for problem in problems)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # Core Tools reads Values into Dictionary<string, string>: an object there makes the whole
        # file fail to parse, and it then runs with no settings at all.
        (lambda s: s["Values"].update(SAS_NESTED={"a": "b"}), "Values.SAS_NESTED"),
        (lambda s: s["Values"].update(SAS_LIST=["a"]), "Values.SAS_LIST"),
        (lambda s: s["Values"].update(SAS_NUMBER=5), "Values.SAS_NUMBER"),
        (lambda s: s["Values"].update(SAS_FLAG=True), "Values.SAS_FLAG"),
        (lambda s: s["Values"].update(SAS_NULL=None), "Values.SAS_NULL"),
        (lambda s: s["Values"].update(FUNCTIONS_WORKER_RUNTIME="node"), "FUNCTIONS_WORKER_RUNTIME"),
        (lambda s: s["Values"].pop("FUNCTIONS_WORKER_RUNTIME"), "FUNCTIONS_WORKER_RUNTIME"),
        (lambda s: s["Values"].pop("AzureWebJobsStorage"), "AzureWebJobsStorage"),
        (lambda s: s["Values"].update({"Section:Key": "x"}), "Section:Key"),
        (lambda s: s.update(IsEncrypted="false"), "IsEncrypted"),
        (lambda s: s.update(IsEncrypted=True), "IsEncrypted"),
        (lambda s: s.update(Values="FUNCTIONS_WORKER_RUNTIME=python"), "Values"),
        (lambda s: s.update(Host={"LocalHttpPort": "7071"}), "Host.LocalHttpPort"),
        (lambda s: s.update(Host={"Port": 7071}), "Port"),
        (lambda s: s.update(Settings={}), "Settings"),
    ],
)
def test_each_way_of_breaking_local_settings_is_caught(change: Mutation, expected: str) -> None:
    problems = check_local_settings(mutated(SAMPLE, change))
    assert any(expected in problem for problem in problems), problems


def test_local_settings_accepts_what_core_tools_accepts() -> None:
    def extras(s: dict[str, Any]) -> None:
        s["Values"]["ServiceBusConnection__fullyQualifiedNamespace"] = "sb.servicebus.windows.net"
        s["Host"] = {"LocalHttpPort": 7072, "CORS": "*", "CORSCredentials": False}
        s["ConnectionStrings"] = {
            "Plain": "x",
            "WithProvider": {"ConnectionString": "y", "ProviderName": "z"},
        }

    assert check_local_settings(mutated(SAMPLE, extras)) == []


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    path.write_text('{"IsEncrypted": false, "Values": {"A": "1", "A": "2"}}')
    assert host_config.check_file(path, check_local_settings) == ["local.settings.json: duplicate key 'A'"]
