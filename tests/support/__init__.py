"""Helpers the tests import: plain modules named for what they hold (fixtures stay in conftest)."""
