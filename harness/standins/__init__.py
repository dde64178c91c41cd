"""Test infrastructure that runs outside pytest too (a local AMQP broker for the Service Bus SDK)."""
