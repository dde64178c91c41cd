"""One fixed-width UTC timestamp format for every stored time.

Fixed width with a ``Z`` suffix makes stored strings sort in time order, so range queries on
``CompleteBy`` / ``NotBefore`` work as plain string comparisons in every store (Cosmos, SQLite).
"""

from datetime import UTC, datetime

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def as_utc(moment: datetime) -> datetime:
    """The same moment in UTC; a naive datetime is refused, since its zone is a guess."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"naive datetime {moment!r}: timestamps must be timezone-aware")
    return moment.astimezone(UTC)


def format_ts(moment: datetime) -> str:
    return as_utc(moment).strftime(_FORMAT)


def parse_ts(text: str) -> datetime:
    # fromisoformat reads this format (and any ISO 8601 with an offset) at a tenth of
    # strptime's cost, which matters on devhost's hot path.
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {text!r}")
    return parsed.astimezone(UTC)


def format_optional(moment: datetime | None) -> str | None:
    return None if moment is None else format_ts(moment)


def parse_optional(text: str | None) -> datetime | None:
    return None if text is None else parse_ts(text)
