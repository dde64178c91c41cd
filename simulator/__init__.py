"""The flaky remote service the Agent calls: inventory and payments over HTTP on loopback.

It misbehaves on purpose, by a fault profile that can change while it runs, and keeps an
effects ledger (every call, every applied effect) that tests use as the judge of what really
happened. Run it with ``python -m simulator``; build it in-process with
:func:`simulator.app.create_app`. Of the rest of the repository it imports only the domain's
timestamps and, to admit only the agent when it stands in for the remote service in Azure
(``simulator/Dockerfile``), the front end's token verifier (``simulator/callers.py``).
"""
