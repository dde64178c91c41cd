"""One fixed-width UTC timestamp format for every stored time.

Fixed width with a ``Z`` suffix makes stored strings sort in time order, so range queries on
``CompleteBy`` / ``NotBefore`` work as plain string comparisons in every store (Cosmos, SQLite).
"""

from datetime import UTC, datetime

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_ts(moment: datetime) -> str:
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(UTC).strftime(_FORMAT)


def parse_ts(text: str) -> datetime:
    try:
        return datetime.strptime(text, _FORMAT).replace(tzinfo=UTC)
    except ValueError:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            raise ValueError(f"timestamp without a time zone: {text!r}") from None
        return parsed.astimezone(UTC)


def format_optional(moment: datetime | None) -> str | None:
    return None if moment is None else format_ts(moment)


def parse_optional(text: str | None) -> datetime | None:
    return None if text is None else parse_ts(text)
