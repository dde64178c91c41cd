"""``harness/emulators/servicebus-config/Config.json`` as the Azure Service Bus emulator accepts it, and
which of its queue properties may differ from the Bicep's, and why.

The emulator reads the file once, at start-up. A config outside the published schema or its limits
does not start: the container runs its set-up, logs "Out of memory" and exits (issue #131 below),
so nothing points at the file. This module checks the file against what is documented:

- the shape of the emulator's published config schema, ``Config-schema.json`` (SCHEMA_URL):
  ``UserConfig.Namespaces`` (exactly one, named ``sbemulatorns``) with ``Queues`` and ``Topics``,
  each entity a ``Name`` and its ``Properties`` (the documented names and types, nothing else),
  and ``UserConfig.Logging.Type``;
- its limits: the durations and counts each property accepts (the schema's descriptions and
  bounds), the entity name rule (the schema's ``pattern``), and the usage quotas of the emulator
  overview (OVERVIEW_URL, "Usage quotas"): one namespace, at most 50 queues and topics in it, at
  most 50 subscriptions per topic.

Durations are the schema's ISO 8601 pattern (years, months, days, hours, minutes, whole seconds).

Nothing here imports pycep: the functions are plain Python, and tests/iac calls them directly.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCHEMA_URL = (
    "https://github.com/Azure/azure-service-bus-emulator-installer/blob/main/"
    "ServiceBus-Emulator/Schema/Config-schema.json"
)
OVERVIEW_URL = "https://learn.microsoft.com/azure/service-bus-messaging/overview-emulator#usage-quotas"
STARTUP_FAILURE_URL = "https://github.com/Azure/azure-service-bus-emulator-installer/issues/131"

# The schema's enum: "You can't rename the preset namespace" (overview, "Quota configuration changes").
NAMESPACE_NAME = "sbemulatorns"
MAX_NAMESPACES = 1
# "Number of entities(queues/topics) in a namespace: 50"; the schema: "Max Queues + Topics per
# namespace is 50".
MAX_ENTITIES = 50
MAX_SUBSCRIPTIONS = 50  # "Number of Subscriptions per topic: 50"
MAX_RULES = 1000  # the schema's maxItems of a subscription's Rules
LOGGING_TYPES = ("File", "Console", "File,Console", "Console,File")
FILTER_TYPES = ("Correlation", "Sql")

# The schema's entity name pattern, ^[A-Za-z0-9]$|^[A-Za-z0-9][\w-\.\/]*[A-Za-z0-9]$ (JSON Schema
# regexes are ECMA 262: \w is ASCII).
ENTITY_NAME = re.compile(r"[A-Za-z0-9]|[A-Za-z0-9][\w\-./]*[A-Za-z0-9]", re.ASCII)
# The schema's duration pattern, with groups: years, months, days, hours, minutes, seconds.
DURATION = re.compile(
    r"P(?!$)(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?", re.ASCII
)
# What the Bicep may write (ARM takes fractional seconds and no years or months).
BICEP_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.ASCII)


@dataclass(frozen=True)
class Prop:
    """One documented property: its kind and, for numbers and durations, the accepted range."""

    kind: str  # "bool", "int", "duration" or "entity" (another entity's name, or "")
    low: str | int | None = None
    high: str | int | None = None

    def describe(self) -> str:
        if self.kind == "duration":
            return f"an ISO 8601 duration {self.low}..{self.high}"
        if self.kind == "int":
            return f"an integer {self.low}..{self.high}"
        if self.kind == "bool":
            return "true or false"
        return "an entity name or empty"


# Config-schema.json, queue Properties. LockDuration: PT5S..PT5M since emulator 1.1.2 ("Added
# support for updating LockDuration to a minimum of 5 seconds"; before it, PT1M..PT5M).
QUEUE_PROPERTIES: dict[str, Prop] = {
    "DeadLetteringOnMessageExpiration": Prop("bool"),
    "DefaultMessageTimeToLive": Prop("duration", "PT5M", "PT1H"),
    "DuplicateDetectionHistoryTimeWindow": Prop("duration", "PT5S", "PT5M"),
    "ForwardDeadLetteredMessagesTo": Prop("entity"),
    "ForwardTo": Prop("entity"),
    "LockDuration": Prop("duration", "PT5S", "PT5M"),
    "MaxDeliveryCount": Prop("int", 1, 10),
    "RequiresDuplicateDetection": Prop("bool"),
    "RequiresSession": Prop("bool"),
}
TOPIC_PROPERTIES: dict[str, Prop] = {
    "DefaultMessageTimeToLive": Prop("duration", "PT5M", "PT1H"),
    "DuplicateDetectionHistoryTimeWindow": Prop("duration", "PT5S", "PT5M"),
    "RequiresDuplicateDetection": Prop("bool"),
}
SUBSCRIPTION_PROPERTIES: dict[str, Prop] = {
    "DeadLetteringOnMessageExpiration": Prop("bool"),
    "DefaultMessageTimeToLive": Prop("duration", "PT5M", "PT1H"),
    "LockDuration": Prop("duration", "PT1M", "PT5M"),
    "MaxDeliveryCount": Prop("int", 1, 10),
    "ForwardDeadLetteredMessagesTo": Prop("entity"),
    "ForwardTo": Prop("entity"),
    "RequiresSession": Prop("bool"),
}

# The queue properties whose emulator value may differ from the Bicep's, and why: the Bicep's value
# is outside what the emulator accepts. For these, Config.json holds the Bicep's value when the
# emulator accepts it, else the emulator's nearest bound (its documented maximum, for every value
# the Bicep uses today). Every other property must be equal in both (cross_checks.py).
EMULATOR_CLAMPED: dict[str, str] = {
    "DefaultMessageTimeToLive": (
        "the emulator accepts PT5M..PT1H (Config-schema.json; overview 'Message Time to Live: 1hr'); "
        "Azure keeps messages up to the Bicep's days"
    ),
    "DuplicateDetectionHistoryTimeWindow": (
        "the emulator accepts PT5S..PT5M (Config-schema.json); Azure's window is PT20S..P7D"
    ),
}


@dataclass(frozen=True)
class Finding:
    line: int | None
    what: str
    fix: str


def seconds(text: Any) -> float | None:
    """A duration in seconds: the schema's pattern (a year as 365 days, a month as 30: enough to
    compare with bounds of minutes) or the Bicep's; None if it is neither."""
    if not isinstance(text, str):
        return None
    if match := DURATION.fullmatch(text):
        years, months, days, hours, minutes, secs = (int(g) if g else 0 for g in match.groups())
        return float((((years * 365 + months * 30 + days) * 24 + hours) * 60 + minutes) * 60 + secs)
    if (match := BICEP_DURATION.fullmatch(text)) and text not in ("P", "PT"):
        days, hours, minutes = (int(g) if g else 0 for g in match.groups()[:3])
        return ((days * 24 + hours) * 60 + minutes) * 60 + float(match.group(4) or 0)
    return None


def documented_name(name: str, table: Mapping[str, Prop] = QUEUE_PROPERTIES) -> str | None:
    """The documented spelling of a property name, compared case-insensitively (Bicep is camelCase)."""
    return next((known for known in table if known.lower() == name.lower()), None)


def emulator_value(name: str, bicep_value: Any) -> str | None:
    """What Config.json must hold for a clamped queue property, given the Bicep's value: that value
    when the emulator accepts it, else the bound it passes. None: not a clamped property, or the
    Bicep's value is not a duration."""
    known = documented_name(name)
    if known not in EMULATOR_CLAMPED:
        return None
    prop = QUEUE_PROPERTIES[known]
    value, low, high = seconds(bicep_value), seconds(prop.low), seconds(prop.high)
    if value is None or low is None or high is None:
        return None
    if value > high:
        return str(prop.high)
    if value < low:
        return str(prop.low)
    return str(bicep_value)


# --- validation --------------------------------------------------------------------------------


class _Checker:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.found: list[Finding] = []

    def line_of(self, *needles: str) -> int | None:
        for needle in needles:
            for number, line in enumerate(self.lines, start=1):
                if needle in line:
                    return number
        return None

    def add(self, line: int | None, what: str, fix: str) -> None:
        self.found.append(Finding(line, what, fix))

    def keys(self, value: dict[str, Any], allowed: tuple[str, ...], where: str, line: int | None) -> None:
        for key in value:
            if key not in allowed:
                near = next((a for a in allowed if a.lower() == key.lower()), None)
                hint = f"write it as '{near}'" if near else f"use only {', '.join(allowed)}"
                self.add(line, f"{where}: '{key}' is not in the emulator's config schema", hint)

    def array(self, value: Any, where: str, line: int | None, limit: int, why: str) -> list[Any]:
        if not isinstance(value, list):
            self.add(line, f"{where} is {json.dumps(value)}, not a list", f"write {where} as a JSON list")
            return []
        if len(value) > limit:
            self.add(
                line, f"{where} has {len(value)} entries, the emulator allows {limit} ({why})", "remove some"
            )
        return value

    def name(self, entity: dict[str, Any], where: str, line: int | None) -> str | None:
        name = entity.get("Name")
        if not isinstance(name, str):
            self.add(line, f"{where} has no Name", 'give it a "Name"')
            return None
        if not ENTITY_NAME.fullmatch(name):
            self.add(
                line,
                f"{where}: Name '{name}' breaks the emulator's name rule",
                "letters, digits, '_', '-', '.' and '/', starting and ending with a letter or digit",
            )
        return name

    def properties(
        self, entity: dict[str, Any], table: Mapping[str, Prop], where: str, line: int | None
    ) -> None:
        props = entity.get("Properties", {})
        if not isinstance(props, dict):
            self.add(line, f"{where}: Properties is not an object", 'write "Properties": { ... }')
            return
        for key, value in props.items():
            prop = table.get(key)
            if prop is None:
                near = documented_name(key, table)
                hint = (
                    f"write it as '{near}'" if near else f"use the documented properties ({', '.join(table)})"
                )
                self.add(line, f"{where}: property '{key}' is not in the emulator's config schema", hint)
                continue
            problem = _invalid(prop, value)
            if problem:
                self.add(
                    line,
                    f"{where}: {key} is {json.dumps(value)}, {problem}",
                    f"set {key} to {prop.describe()} ({SCHEMA_URL})",
                )


def _invalid(prop: Prop, value: Any) -> str | None:
    """Why the emulator rejects this value, or None."""
    checks = {"bool": _invalid_bool, "int": _invalid_int, "entity": _invalid_entity}
    return checks.get(prop.kind, _invalid_duration)(prop, value)


def _invalid_bool(_: Prop, value: Any) -> str | None:
    return None if isinstance(value, bool) else "not a boolean"


def _invalid_int(prop: Prop, value: Any) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return "not an integer"
    assert isinstance(prop.low, int) and isinstance(prop.high, int)
    return None if prop.low <= value <= prop.high else f"outside the emulator's {prop.low}..{prop.high}"


def _invalid_entity(_: Prop, value: Any) -> str | None:
    if not isinstance(value, str):
        return "not a string"
    return None if value == "" or ENTITY_NAME.fullmatch(value) else "not an entity name"


def _invalid_duration(prop: Prop, value: Any) -> str | None:
    if not isinstance(value, str) or not DURATION.fullmatch(value):
        return "not an ISO 8601 duration the emulator reads (PnYnMnDTnHnMnS, whole seconds)"
    value_s, low, high = seconds(value), seconds(prop.low), seconds(prop.high)
    assert value_s is not None and low is not None and high is not None
    return None if low <= value_s <= high else f"outside the emulator's {prop.low}..{prop.high}"


def validate(text: str) -> list[Finding]:
    """Every way this Config.json breaks the emulator's published schema and limits."""
    check = _Checker(text)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as error:
        check.add(error.lineno, f"not JSON: {error.msg}", "fix the JSON")
        return check.found
    user = doc.get("UserConfig") if isinstance(doc, dict) else None
    if not isinstance(user, dict):
        check.add(
            None,
            "has no UserConfig object",
            'write { "UserConfig": { "Namespaces": [...], "Logging": {...} } }',
        )
        return check.found
    check.keys(doc, ("UserConfig",), "the top level", None)
    head = check.line_of('"UserConfig"')
    check.keys(user, ("Namespaces", "Logging"), "UserConfig", head)
    _logging(check, user.get("Logging"))
    if "Namespaces" not in user:
        check.add(head, "UserConfig has no Namespaces", f'declare one namespace "{NAMESPACE_NAME}"')
        return check.found
    line = check.line_of('"Namespaces"')
    namespaces = check.array(user["Namespaces"], "UserConfig.Namespaces", line, MAX_NAMESPACES, OVERVIEW_URL)
    if isinstance(user["Namespaces"], list) and not namespaces:
        check.add(line, "UserConfig.Namespaces is empty", f'declare the namespace "{NAMESPACE_NAME}"')
    for index, namespace in enumerate(namespaces):
        _namespace(check, namespace, f"Namespaces[{index}]")
    return check.found


def _logging(check: _Checker, logging: Any) -> None:
    line = check.line_of('"Logging"')
    if not isinstance(logging, dict):
        check.add(line, "UserConfig has no Logging object", '"Logging": { "Type": "File" } (or Console)')
        return
    check.keys(logging, ("Type",), "Logging", line)
    if logging.get("Type") not in LOGGING_TYPES:
        check.add(
            line,
            f"Logging.Type is {json.dumps(logging.get('Type'))}",
            f"one of {', '.join(LOGGING_TYPES)}",
        )


def _namespace(check: _Checker, namespace: Any, where: str) -> None:
    if not isinstance(namespace, dict):
        check.add(None, f"{where} is not an object", "write { Name, Queues, Topics }")
        return
    line = check.line_of(f'"{namespace.get("Name")}"') if isinstance(namespace.get("Name"), str) else None
    check.keys(namespace, ("Name", "Queues", "Topics"), where, line)
    if namespace.get("Name") != NAMESPACE_NAME:
        check.add(
            line,
            f"{where}: Name is {json.dumps(namespace.get('Name'))}; the emulator has one namespace, "
            f"'{NAMESPACE_NAME}', which cannot be renamed",
            f'"Name": "{NAMESPACE_NAME}"',
        )
    for key in ("Queues", "Topics"):
        if key not in namespace:
            check.add(
                line, f"{where} has no {key} (the schema requires it)", f'write "{key}": [] if there are none'
            )
    why = f"queues and topics together ({OVERVIEW_URL})"
    queues = check.array(namespace.get("Queues", []), f"{where}.Queues", line, MAX_ENTITIES, why)
    topics = check.array(namespace.get("Topics", []), f"{where}.Topics", line, MAX_ENTITIES, why)
    each_fits = len(queues) <= MAX_ENTITIES and len(topics) <= MAX_ENTITIES
    if each_fits and len(queues) + len(topics) > MAX_ENTITIES:
        check.add(
            line,
            f"{where} has {len(queues)} queues and {len(topics)} topics, the emulator allows "
            f"{MAX_ENTITIES} entities in all ({OVERVIEW_URL})",
            "remove some",
        )
    seen: dict[str, str] = {}
    for index, queue in enumerate(queues):
        _entity(
            check,
            queue,
            f"queue {where}.Queues[{index}]",
            QUEUE_PROPERTIES,
            ("Name", "Properties"),
            seen=seen,
        )
    for index, topic in enumerate(topics):
        entity = f"topic {where}.Topics[{index}]"
        _entity(check, topic, entity, TOPIC_PROPERTIES, ("Name", "Properties", "Subscriptions"), seen=seen)
        if isinstance(topic, dict):
            _subscriptions(check, topic, entity)


def _entity(
    check: _Checker,
    entity: Any,
    where: str,
    table: Mapping[str, Prop],
    keys: tuple[str, ...],
    *,
    seen: dict[str, str],
) -> None:
    if not isinstance(entity, dict):
        check.add(None, f"{where} is not an object", "write { Name, Properties }")
        return
    name = entity.get("Name")
    line = check.line_of(f'"Name": "{name}"', f'"{name}"') if isinstance(name, str) else None
    label = f"{where.split(maxsplit=1)[0]} '{name}'" if isinstance(name, str) else where
    check.keys(entity, keys, label, line)
    name = check.name(entity, label, line)
    if name is not None:
        # Entity names are case-insensitive in Service Bus, queues and topics share one namespace.
        if name.lower() in seen:
            check.add(
                line,
                f"{label}: the name is also that of {seen[name.lower()]}",
                "give each entity its own name",
            )
        seen.setdefault(name.lower(), label)
    check.properties(entity, table, label, line)


def _subscriptions(check: _Checker, topic: dict[str, Any], where: str) -> None:
    line = check.line_of(f'"{topic.get("Name")}"') if isinstance(topic.get("Name"), str) else None
    if "Subscriptions" not in topic:
        check.add(line, f"{where} has no Subscriptions (the schema requires them)", "declare at least one")
        return
    subscriptions = check.array(
        topic["Subscriptions"], f"{where}.Subscriptions", line, MAX_SUBSCRIPTIONS, OVERVIEW_URL
    )
    if isinstance(topic["Subscriptions"], list) and not subscriptions:
        check.add(line, f"{where} has no subscription (the schema requires at least one)", "declare one")
    seen: dict[str, str] = {}
    for index, subscription in enumerate(subscriptions):
        label = f"subscription {where}.Subscriptions[{index}]"
        _entity(
            check, subscription, label, SUBSCRIPTION_PROPERTIES, ("Name", "Properties", "Rules"), seen=seen
        )
        rules = subscription.get("Rules", []) if isinstance(subscription, dict) else []
        for rule in check.array(rules, f"{label}.Rules", line, MAX_RULES, SCHEMA_URL):
            kind = rule.get("Properties", {}).get("FilterType") if isinstance(rule, dict) else None
            if (
                not isinstance(rule, dict)
                or not isinstance(rule.get("Name"), str)
                or kind not in FILTER_TYPES
            ):
                check.add(
                    line,
                    f"{label}: a rule without a Name and Properties.FilterType {' or '.join(FILTER_TYPES)}",
                    f"write each rule as the schema does ({SCHEMA_URL})",
                )
