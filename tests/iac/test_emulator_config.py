"""harness/tools/iac/emulator.py: Config.json against the Service Bus emulator's published config schema and
limits, called directly (no pycep, no venv). The checker's own runs over broken copies of the
repository are in test_iac.py."""

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from harness.tools.iac import emulator

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "harness" / "emulators" / "servicebus-config" / "Config.json"


def shipped() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(CONFIG.read_text(encoding="utf-8"))
    return document


def queues(document: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = document["UserConfig"]["Namespaces"][0]["Queues"]
    return found


def findings(document: Any) -> list[str]:
    return [f"{f.what} — {f.fix}" for f in emulator.validate(json.dumps(document, indent=2))]


def assert_finds(document: Any, *needles: str) -> None:
    found = findings(document)
    assert any(all(n in line for n in needles) for line in found), f"no finding names {needles}: {found}"


def test_the_shipped_config_is_what_the_emulator_accepts() -> None:
    assert emulator.validate(CONFIG.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    ("prop", "value", "needle"),
    [
        ("DefaultMessageTimeToLive", "P14D", "outside the emulator's PT5M..PT1H"),
        ("DefaultMessageTimeToLive", "P1D", "outside the emulator's PT5M..PT1H"),
        ("DefaultMessageTimeToLive", "PT1M", "outside the emulator's PT5M..PT1H"),
        ("DuplicateDetectionHistoryTimeWindow", "PT10M", "outside the emulator's PT5S..PT5M"),
        ("LockDuration", "PT10M", "outside the emulator's PT5S..PT5M"),
        ("LockDuration", "PT1S", "outside the emulator's PT5S..PT5M"),
        ("MaxDeliveryCount", 11, "outside the emulator's 1..10"),
        ("MaxDeliveryCount", 0, "outside the emulator's 1..10"),
        ("MaxDeliveryCount", "5", "not an integer"),
        ("RequiresSession", "false", "not a boolean"),
        ("LockDuration", "PT1.5S", "not an ISO 8601 duration"),
        ("LockDuration", 60, "not an ISO 8601 duration"),
        ("ForwardTo", "-bad-", "not an entity name"),
    ],
)
def test_a_property_value_the_emulator_rejects_is_found(prop: str, value: Any, needle: str) -> None:
    document = shipped()
    queues(document)[0]["Properties"][prop] = value
    assert_finds(document, f"queue '{queues(document)[0]['Name']}': {prop} is {json.dumps(value)}", needle)


def test_the_values_azure_uses_are_rejected_on_every_queue() -> None:
    """The issue's ~10 places: Azure's TTLs and duplicate detection window break the emulator."""
    document = shipped()
    for queue in queues(document):
        queue["Properties"]["DefaultMessageTimeToLive"] = "P7D"
        queue["Properties"]["DuplicateDetectionHistoryTimeWindow"] = "PT10M"
    assert len(findings(document)) == 2 * len(queues(document))


def test_an_undocumented_or_misspelt_property_is_found() -> None:
    document = shipped()
    queues(document)[0]["Properties"]["maxDeliveryCount"] = 5
    queues(document)[1]["Properties"]["EnablePartitioning"] = True
    assert_finds(document, "'maxDeliveryCount' is not in the emulator's config schema", "'MaxDeliveryCount'")
    assert_finds(document, "'EnablePartitioning' is not in the emulator's config schema")


def test_entity_names_follow_the_rule_and_are_unique() -> None:
    document = shipped()
    extra = copy.deepcopy(queues(document)[0])
    extra["Name"] = "ORDERS"  # entity names are case-insensitive
    queues(document).append(extra)
    bad = copy.deepcopy(queues(document)[0])
    bad["Name"] = "orders-"
    queues(document).append(bad)
    assert_finds(document, "queue 'ORDERS': the name is also that of queue 'orders'")
    assert_finds(document, "queue 'orders-': Name 'orders-' breaks the emulator's name rule")


def test_at_most_fifty_queues_and_topics() -> None:
    document = shipped()
    template = queues(document)[0]
    namespace = document["UserConfig"]["Namespaces"][0]
    namespace["Queues"] = [
        {**copy.deepcopy(template), "Name": f"q{n}"} for n in range(emulator.MAX_ENTITIES + 1)
    ]
    assert_finds(document, "Queues has 51 entries, the emulator allows 50")
    namespace["Queues"] = namespace["Queues"][:40]
    namespace["Topics"] = [
        {"Name": f"t{n}", "Properties": {}, "Subscriptions": [{"Name": "s"}]} for n in range(11)
    ]
    assert_finds(document, "40 queues and 11 topics, the emulator allows 50 entities in all")


def test_one_namespace_named_sbemulatorns() -> None:
    document = shipped()
    document["UserConfig"]["Namespaces"][0]["Name"] = "mynamespace"
    assert_finds(document, 'Name is "mynamespace"', "'sbemulatorns', which cannot be renamed")
    document = shipped()
    document["UserConfig"]["Namespaces"].append(copy.deepcopy(document["UserConfig"]["Namespaces"][0]))
    assert_finds(document, "Namespaces has 2 entries, the emulator allows 1")
    document = shipped()
    del document["UserConfig"]["Namespaces"][0]["Topics"]
    assert_finds(document, "has no Topics (the schema requires it)")


def test_logging_is_required_and_typed() -> None:
    document = shipped()
    document["UserConfig"]["Logging"] = {"Type": "Syslog"}
    assert_finds(document, 'Logging.Type is "Syslog"')
    del document["UserConfig"]["Logging"]
    assert_finds(document, "UserConfig has no Logging object")


def test_topics_and_subscriptions_have_their_own_limits() -> None:
    document = shipped()
    document["UserConfig"]["Namespaces"][0]["Topics"] = [
        {
            "Name": "events",
            "Properties": {"DefaultMessageTimeToLive": "P1D", "MaxDeliveryCount": 3},
            "Subscriptions": [{"Name": "all", "Properties": {"LockDuration": "PT30S"}}],
        },
        {"Name": "empty", "Properties": {}, "Subscriptions": []},
    ]
    assert_finds(document, "topic 'events': DefaultMessageTimeToLive is \"P1D\"", "PT5M..PT1H")
    assert_finds(
        document, "topic 'events': property 'MaxDeliveryCount' is not in the emulator's config schema"
    )
    assert_finds(document, "subscription 'all': LockDuration is \"PT30S\"", "PT1M..PT5M")
    assert_finds(document, "has no subscription (the schema requires at least one)")


def test_not_json_or_not_a_config() -> None:
    assert "not JSON" in emulator.validate("{")[0].what
    assert_finds({"Namespaces": []}, "has no UserConfig object")


@pytest.mark.parametrize(
    ("bicep", "expected"),
    [
        ("P14D", "PT1H"),  # beyond the emulator's maximum: its maximum
        ("P1D", "PT1H"),
        ("PT1H", "PT1H"),  # within its range: the Bicep's own value
        ("PT30M", "PT30M"),
        ("PT1M", "PT5M"),  # below its minimum: its minimum
    ],
)
def test_the_emulator_value_of_a_clamped_ttl(bicep: str, expected: str) -> None:
    assert emulator.emulator_value("defaultMessageTimeToLive", bicep) == expected


def test_the_emulator_value_of_the_duplicate_detection_window() -> None:
    assert emulator.emulator_value("duplicateDetectionHistoryTimeWindow", "PT10M") == "PT5M"
    assert emulator.emulator_value("duplicateDetectionHistoryTimeWindow", "PT2M") == "PT2M"


def test_only_the_clamped_properties_may_differ() -> None:
    assert set(emulator.EMULATOR_CLAMPED) == {
        "DefaultMessageTimeToLive",
        "DuplicateDetectionHistoryTimeWindow",
    }
    assert all(name in emulator.QUEUE_PROPERTIES for name in emulator.EMULATOR_CLAMPED)
    assert emulator.emulator_value("lockDuration", "PT1M") is None  # not clamped: must be equal
    assert emulator.emulator_value("maxDeliveryCount", 5) is None
