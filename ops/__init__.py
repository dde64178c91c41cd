"""Operator tools: ``python -m ops``."""
