"""The mark on a report of a docs shell block (tests/docs/), by which tests/conftest.py counts them."""

DOC_BLOCK = "doc shell block"
