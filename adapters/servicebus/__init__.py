"""Service Bus, one package for every profile and every process.

- ``messages``: the one model of a received message and the one decoder from the SDK's.
- ``azure``: the app's sender and settlement on a namespace (or any AMQP broker), and the client builder.
- ``local_bus``: the local bus, Service Bus queue semantics in one SQLite file (embedded profile).
- ``local_messaging``: the app's sender and settlement on the local bus.
- ``agent_queues``: the Agent's request/reply queues, on the local bus or on Service Bus (aio).
"""
