"""What a command that cannot do its work raises, and the exit code each becomes (ops/cli.py)."""

EXIT_REFUSED, EXIT_USAGE, EXIT_UNAVAILABLE = 1, 2, 3


class Refused(Exception):
    """An operator request the system will not carry out; the message says why."""


class BadArgument(Exception):
    """An argument the settings do not know (an app, a queue); the message lists what they know."""
