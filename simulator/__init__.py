"""The flaky remote service the Agent calls: inventory and payments over HTTP on loopback.

It misbehaves on purpose, by a fault profile that can change while it runs, and keeps an
effects ledger (every call, every applied effect) that tests use as the judge of what really
happened. Run it with ``python -m simulator``; build it in-process with
:func:`simulator.app.create_app`. Nothing here imports the rest of the repository.
"""
