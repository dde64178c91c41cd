"""``python -m ops dashboard`` in a real browser: headless Chromium (Debian's package) driven by
Playwright shows, on each panel, the numbers the stores hold during a small run.

The app runs on devhost with the scripted agent on a virtual clock (tests/support/app.py); the
dashboard serves over the same stores, built as ``python -m ops`` builds them. The app's workers
write their telemetry when they exit, so the store-backed panels are checked while the app runs
and the telemetry-backed ones after it stops: the open page picks both up without a reload.
With SAS_SCREENSHOTS set to a folder, the test saves the pages there (docs/images/ holds them).
"""

import asyncio
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from playwright import async_api as playwright_api

from adapters.clock import host_clock
from bootstrap import build_ports
from domain.states import ProcessState
from ops.dashboard import Dashboard
from settings import Settings
from tests.support.app import App, start_app, submission

CHROMIUM = Path("/usr/bin/chromium")
# The flags a CI without outbound network needs (no background connections); Playwright gives
# each launch a fresh profile directory of its own.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(autouse=True)
def _chromium() -> None:
    # `make test` installs it (make system-deps): missing, the test fails naming what to install.
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package (make system-deps)")


ORDERS = [("dash-ok-1", "app-a"), ("dash-ok-2", "app-b"), ("dash-fail", "app-a")]


class Served:
    """The dashboard on its own event loop, in a thread, as ``python -m ops dashboard`` runs it."""

    def __init__(self, telemetry: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.dashboard = Dashboard(
            lambda: build_ports(Settings.from_env(os.environ), host_clock()), telemetry
        )
        self.url = asyncio.run_coroutine_threadsafe(self.dashboard.start(0), self.loop).result(30)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.dashboard.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def cell(page: Any, panel: str, key: str) -> Any:
    return page.locator(f'[data-testid="panel-{panel}"] tr[data-key="{key}"] td.n')


async def _open(url: str) -> tuple[Any, Any, Any]:
    # The async API on the test's loop: the sync one runs a loop of its own, and the app's host
    # needs this thread's loop between the browser's steps.
    playwright = await playwright_api.async_playwright().start()
    browser = await playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS
    )
    page = await browser.new_page(viewport={"width": 1400, "height": 1500})
    await page.goto(url)
    return playwright, browser, page


async def _store_panels(page: Any, app: App) -> None:
    expect = playwright_api.expect
    states = app.states
    for state in ProcessState:
        expected = states.count_in_states(frozenset({state}))
        await expect(cell(page, "states", state.value)).to_have_text(str(expected))
    assert states.count_in_states(frozenset({ProcessState.PROCESSED})) == 2
    pending = states.count_in_states(frozenset({ProcessState.PENDING}))
    in_flight = states.count_in_states(frozenset({ProcessState.PROCESSING, ProcessState.COMPENSATING}))
    await expect(cell(page, "backlog", "backlog (Pending)")).to_have_text(str(pending))
    await expect(cell(page, "backlog", "in flight")).to_have_text(str(in_flight))
    await expect(cell(page, "backlog", "threshold")).to_have_text(os.environ["SAS_BACKLOG_THRESHOLD"])
    await expect(cell(page, "backlog", "cap")).to_have_text(os.environ["SAS_MAX_IN_FLIGHT"])
    alerts = Counter(a["Event"] for a in app.alerts())
    assert alerts, "the failed order raised no alert: the scenario no longer tests the panel"
    for event, count in alerts.items():
        await expect(cell(page, "alerts", event)).to_have_text(str(count))
    for queue in ("orders", "agent-requests", "agent-replies", "operator-alerts", "status-app-a"):
        count = len(app.dead_letters(queue))
        await expect(cell(page, "dead-letters", queue)).to_have_text(str(count))
    failed = [
        s.record
        for state in (ProcessState.ERROR, ProcessState.COMPENSATION_FAILED)
        for s in states.query_in_state(state, 100)
    ]
    assert [r.OrderID for r in failed] == ["dash-fail"]
    row = page.locator('[data-testid="panel-failed"] tr[data-order="dash-fail"]')
    await expect(row).to_contain_text(failed[0].ProcessState.value)
    await expect(row).to_contain_text(str(failed[0].LastError))
    await _screenshot(page, "dashboard-store.png")


async def _telemetry_panels(page: Any, terminal: int, failed_state: str) -> None:
    expect = playwright_api.expect
    await expect(cell(page, "latency", "orders")).to_have_text(str(terminal), timeout=30_000)
    await expect(page.locator("#transitions")).to_contain_text("Processed 2", timeout=30_000)
    await _screenshot(page, "dashboard.png")
    # One order's page: its record and its timeline, from the stores and its spans.
    await page.locator('[data-testid="panel-failed"] a', has_text="dash-fail").click()
    record = page.locator('[data-testid="record"] tr[data-key="ProcessState"]')
    await expect(record).to_contain_text(failed_state)
    timeline = page.locator('[data-testid="timeline"]')
    await expect(timeline.locator('tr[data-source="status"]').first).to_contain_text("status")
    await expect(timeline.locator('tr[data-source="span"]').first).to_be_visible()
    await expect(timeline).to_contain_text("submission")
    await _screenshot(page, "dashboard-order.png")


def test_each_panel_shows_what_the_stores_hold(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    telemetry = tmp_path / "telemetry"
    app: App = start_app(loop, tmp_path, monkeypatch, settings={"SAS_TELEMETRY_DIR": str(telemetry)})
    served = Served(telemetry)
    stopped = False
    playwright, browser, page = loop.run_until_complete(_open(served.url))
    try:
        for order_id, submitter in ORDERS:
            # BLOCKED-1 fails validation, the first step: Error, with nothing to undo.
            sku = "BLOCKED-1" if order_id == "dash-fail" else "SKU-1"
            app.submit(submission(order_id, app=submitter, sku=sku))
        app.run_until_terminal(*(o for o, _ in ORDERS))
        loop.run_until_complete(_store_panels(page, app))
        failed_state = app.record("dash-fail").ProcessState.value
        # The workers write their spans and metrics as they exit; the open page picks them up.
        app.stop()
        stopped = True
        terminal = sum(_terminal_counts(served))
        loop.run_until_complete(_telemetry_panels(page, terminal, failed_state))
    finally:
        loop.run_until_complete(browser.close())
        loop.run_until_complete(playwright.stop())
        served.stop()
        if not stopped:
            app.stop()


def _terminal_counts(served: Served) -> list[int]:
    """How many orders are terminal, read through the dashboard's own ports (the app's are closed)."""

    def count(picture: object) -> list[int]:
        states = picture.ports.states  # type: ignore[attr-defined]
        terminal = (
            ProcessState.PROCESSED,
            ProcessState.COMPENSATED,
            ProcessState.ERROR,
            ProcessState.COMPENSATION_FAILED,
        )
        return [states.count_in_states(frozenset({s})) for s in terminal]

    return asyncio.run_coroutine_threadsafe(served.dashboard.run(count), served.loop).result(30)


async def _screenshot(page: Any, name: str) -> None:
    folder = os.environ.get("SAS_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(Path(folder) / name), full_page=True)
