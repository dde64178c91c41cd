"""The instant the domain, service and contract tests start their clocks at."""

from datetime import UTC, datetime

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
