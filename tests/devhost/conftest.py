"""Fixtures for devhost: an in-process host on the sample app (tests/support/devhost_sample.py)."""

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.devhost_sample import Sample, make_sample


@pytest.fixture
def sample(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Sample]:
    running = make_sample(loop, tmp_path, monkeypatch)
    yield running
    loop.run_until_complete(running.host.stop())
