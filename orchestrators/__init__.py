"""Durable orchestrators, versioned by name (``order_workflow_v1``, ...)."""
