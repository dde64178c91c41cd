"""Local TCP ports for the servers tests, benchmarks and the demo start."""

import socket


def free_port() -> int:
    """A port no one listens on now. Another process may take it before the caller binds it;
    on a test machine that race is rare enough, and the server then fails loudly."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
