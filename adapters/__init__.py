"""Adapters behind the ports of ``domain.ports``: one module per backend."""
