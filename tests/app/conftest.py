"""The real function_app.py on devhost with a scripted agent (tests/support/app.py)."""

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.app import App, start_app


@pytest.fixture
def app(loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    running = start_app(loop, tmp_path, monkeypatch)
    yield running
    running.stop()


@pytest.fixture
def app_in_process(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[App]:
    """The app imported into the test's process: for fault injection that replaces the app's
    ports (``function_app.ports``)."""
    running = start_app(loop, tmp_path, monkeypatch, in_process=True)
    yield running
    running.stop()
