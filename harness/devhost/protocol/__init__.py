"""devhost's copy of the Functions language-worker protocol (``function_rpc.proto``).

The messages the .NET host and the Python worker exchange, with the upstream names and field
numbers; devhost builds them to drive the real worker (``harness.devhost.worker``).
"""

from harness.devhost.protocol.build import compile_if_stale

compile_if_stale()
