"""``python -m ops dashboard`` in a real browser: headless Chromium (Debian's package) driven by
Playwright shows, on each panel, the numbers the stores hold during a small run.

The app runs on devhost with the scripted agent on a virtual clock (tests/support/app.py); the
dashboard serves over the same stores, built as ``python -m ops`` builds them. Mid-run the app's
worker process is killed with SIGKILL, an activity in flight on it: the page must still show
every count the stores and the telemetry files hold (telemetry is written on each change), the
killed invocation as a function failure (devhost's invocation results), and, at a laptop's
1366x768, what failed and why above the fold. With SAS_SCREENSHOTS set to a folder, the test
saves the pages there (harness/scripts/screenshots.sh retakes docs/images/ so).
"""

import asyncio
import os
import re
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from playwright import async_api as playwright_api

from adapters.clock import host_clock
from bootstrap import build_ports
from domain import transitions
from domain.messages import AgentRequest
from domain.states import ProcessState
from harness.devhost import invocation_log
from harness.devhost.worker_processes import WorkerProcesses
from ops import outage_view
from ops.dashboard import Dashboard
from settings import Settings
from tests.support.app import App, start_app, submission
from tests.support.scripted_agent import Answer

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


ORDERS = [("dash-ok-1", "app-a"), ("dash-ok-2", "app-b"), ("dash-fail", "app-a"), ("dash-undo", "app-b")]
ORDERS += [(f"dash-more-{n}", "app-a") for n in range(4)]
PROCESSED = 6  # the ok and more orders
LAPTOP: playwright_api.ViewportSize = {"width": 1366, "height": 768}


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
    page = await browser.new_page(viewport=LAPTOP)
    await page.goto(url)
    return playwright, browser, page


async def _above_the_fold(page: Any, selector: str) -> None:
    """Seen without scrolling: the element's box ends within the laptop's viewport."""
    await page.evaluate("window.scrollTo(0, 0)")
    element = page.locator(selector).first
    box = None
    # The page redraws its panels each second: a row found a moment ago may be the one replaced
    # since, whose box is then None. Each look waits for the row drawn now.
    for _ in range(3):
        await element.wait_for(state="visible")
        if (box := await element.bounding_box()) is not None:
            break
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= LAPTOP["height"], (selector, box)


async def _store_panels(page: Any, app: App, outcomes: list[invocation_log.FunctionOutcomes]) -> None:
    expect = playwright_api.expect
    states = app.states
    for state in ProcessState:
        expected = states.count_in_states(frozenset({state}))
        await expect(cell(page, "states", state.value)).to_have_text(str(expected))
    assert states.count_in_states(frozenset({ProcessState.PROCESSED})) == PROCESSED
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
    # The killed invocation, as devhost recorded it: per function, its count and last error.
    failing = [o for o in outcomes if o.failed]
    assert failing, "the kill failed no invocation: the scenario no longer tests the panel"
    for outcome in failing:
        function = page.locator(f'[data-testid="panel-functions"] tr[data-key="{outcome.function}"]')
        await expect(function.locator("td").nth(1)).to_have_text(str(outcome.failed))
        await expect(function).to_contain_text(str(outcome.last_error).splitlines()[0])
    health = page.locator('[data-testid="health"]')
    await expect(health).to_contain_text("Needs attention")
    await expect(health).to_contain_text(f"{sum(o.failed for o in failing)} function failures")
    # What failed and why, first: at 1366x768, before any scrolling.
    for selector in (
        '[data-testid="health"]',
        '[data-testid="panel-failed"] tr[data-order="dash-fail"]',
        f'[data-testid="panel-functions"] tr[data-key="{failing[0].function}"]',
        '[data-testid="panel-dead-letters"]',
        '[data-testid="panel-alerts"]',
    ):
        await _above_the_fold(page, selector)
    await _screenshot(page, "dashboard-store.png", full_page=False)


async def _legend(page: Any, chart: str, label: str) -> Any:
    series = page.locator(f"#{chart} .u-legend tr.u-series", has=page.locator(".u-label", has_text=label))
    return series.first.locator(".u-value")


async def _charts(page: Any, app: App) -> None:
    """Legends show the latest sample's values; the time axis reads HH:MM:SS on the virtual clock."""
    expect = playwright_api.expect
    processed = app.states.count_in_states(frozenset({ProcessState.PROCESSED}))
    await expect(await _legend(page, "states-chart", "Processed")).to_have_text(str(processed))
    await expect(await _legend(page, "backlog-chart", "cap")).to_have_text(os.environ["SAS_MAX_IN_FLIGHT"])
    labels = await page.evaluate('charts["states-chart"].axes[0]._values')
    assert labels and all(re.fullmatch(r"\d\d:\d\d:\d\d", label) for label in labels), labels


async def _telemetry_panels(page: Any, app: App, terminal: int) -> None:
    """Telemetry written on each change: the counts the killed worker made are all there."""
    expect = playwright_api.expect
    await expect(cell(page, "latency", "orders")).to_have_text(str(terminal), timeout=30_000)
    processed = app.states.count_in_states(frozenset({ProcessState.PROCESSED}))
    # At least one transition into Processed per Processed record: none lost to the kill (a replayed
    # invocation may count one twice: delivery is at least once).
    text = await page.locator("#transitions").text_content()
    found = re.search(r"Processed (\d+)", text or "")
    assert found and int(found.group(1)) >= processed, (text, processed)
    await _screenshot(page, "dashboard.png", full_page=True)


async def _order_page(page: Any, order_id: str, state: str, actions: list[str]) -> None:
    """An order drawn as lanes: one per attempt with bars for its work, and the order's markers."""
    expect = playwright_api.expect
    await page.goto(page.url.split("/order/")[0].rstrip("/") + f"/order/{order_id}")
    record = page.locator('[data-testid="record"] tr[data-key="ProcessState"]')
    await expect(record).to_contain_text(state)
    lanes = page.locator('[data-testid="lanes"] g.lane-row')
    await expect(lanes.first).to_have_attribute("data-lane", "order")
    attempt = page.locator(f'[data-testid="lanes"] g.lane-row[data-lane^="{order_id}"]')
    await expect(attempt.first).to_be_visible()
    await expect(attempt.first.locator('rect.bar[data-name^="activity."]').first).to_be_attached()
    await expect(
        attempt.first.locator('rect.round-trip[data-name="agent round trip ChargePayment"]')
    ).to_have_count(1)
    await expect(attempt.first.locator('polygon[data-name="agent.reply"]').first).to_be_attached()
    # Each agent step raced a durable timer, drawn from the attempt's Durable history.
    await expect(attempt.first.locator('rect.bar.timer[data-name^="timer ("]').first).to_be_attached()
    # The compensating actions the log names, each a compensation marker on the attempt's lane.
    for action in actions:
        undo = attempt.first.locator(
            "polygon.compensation", has=page.locator("title", has_text=f"step={action}")
        )
        await expect(undo.first).to_be_attached()
    order_lane = page.locator('[data-testid="lanes"] g.lane-row[data-lane="order"]')
    await expect(order_lane.locator("polygon.status").first).to_be_attached()
    timeline = page.locator('[data-testid="timeline"]')
    await expect(timeline.locator('tr[data-source="status"]').first).to_contain_text("status")
    await expect(timeline).to_contain_text("submission")
    await _screenshot(page, "dashboard-order.png", full_page=True)
    await page.goto(page.url.rsplit("/order/", 1)[0] + "/order/no-such-order")
    await expect(page.locator('[data-testid="updated"]')).to_have_text("no order 'no-such-order'")


async def _waiting_panel(page: Any, app: App, url: str) -> None:
    """The orders waiting on each dependency (issue 37): what /api/summary's ``waiting_on`` holds,
    counted from the store as ``ops watch`` counts it, drawn as a panel and named in the health line."""
    expect = playwright_api.expect
    await page.goto(url)
    assert outage_view.waiting_on(app.states, 1000).by_dependency == {}
    await expect(cell(page, "waiting", "none")).to_have_text("0")
    # Orders accepted while the orders database is down: held records, as submit_order writes them.
    policy = Settings.from_env(os.environ).scheduler_policy
    for order_id in ("dash-held-1", "dash-held-2"):
        order = submission(order_id)
        record = transitions.create(
            order_id,
            status_queue=order.status_queue,
            order_hash=order.order_hash(),
            now=app.host.clock.now(),
            policy=policy,
        )
        app.states.create_if_absent(transitions.awaiting_order_row(record, "orders database"))
    waiting = outage_view.waiting_on(app.states, 1000).by_dependency
    assert waiting == {"orders database": 2}, waiting
    for dependency, count in waiting.items():
        await expect(cell(page, "waiting", dependency)).to_have_text(str(count))
        await expect(page.locator('[data-testid="health"]')).to_contain_text(
            f"{count} orders waiting on the {dependency}"
        )
    await expect(cell(page, "waiting", "none")).to_have_count(0)


def _script(request: AgentRequest, n: int) -> Answer:
    # dash-undo's charge is refused: its reservation is undone (compensation on its timeline).
    return (
        Answer("permanent")
        if request.OrderID == "dash-undo" and request.Step == "ChargePayment"
        else Answer("ok")
    )


def test_each_panel_shows_what_the_stores_hold(
    loop: asyncio.AbstractEventLoop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    telemetry = tmp_path / "telemetry"
    app: App = start_app(loop, tmp_path, monkeypatch, settings={"SAS_TELEMETRY_DIR": str(telemetry)})
    app.agent.script = _script
    workers = app.host.worker
    assert isinstance(workers, WorkerProcesses)
    trigger = {spec.function_id: spec.trigger_type for spec in app.host.functions}
    sent: Counter[str] = Counter()
    killed: list[int] = []

    def kill_once(pid: int, function_id: str) -> None:
        # Mid-run, an activity just sent: the worker dies with it (and with its unsent telemetry,
        # were telemetry not written on each change).
        sent[trigger[function_id]] += 1
        if not killed and trigger[function_id] == "activityTrigger" and sent["activityTrigger"] > 6:
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    workers.on_sent.append(kill_once)
    served = Served(telemetry)
    playwright, browser, page = loop.run_until_complete(_open(served.url))
    try:
        for order_id, submitter in ORDERS:
            # BLOCKED-1 fails validation, the first step: Error, with nothing to undo.
            sku = "BLOCKED-1" if order_id == "dash-fail" else "SKU-1"
            app.submit(submission(order_id, app=submitter, sku=sku))
        app.run_until_terminal(*(o for o, _ in ORDERS), days=3)
        app.run_until(lambda: workers.restarts == 1)
        assert killed, "no worker was killed: the scenario no longer tests a kill"
        outcomes = invocation_log.read(tmp_path / "devhost")
        loop.run_until_complete(_store_panels(page, app, outcomes))
        loop.run_until_complete(_charts(page, app))
        terminal = sum(_terminal_counts(served))
        loop.run_until_complete(_telemetry_panels(page, app, terminal))
        undone = _undone(served, "dash-undo")
        assert undone, "dash-undo undid nothing: the scenario no longer tests compensation markers"
        state = app.record("dash-undo").ProcessState.value
        loop.run_until_complete(_order_page(page, "dash-undo", state, undone))
        loop.run_until_complete(_waiting_panel(page, app, served.url))
    finally:
        loop.run_until_complete(browser.close())
        loop.run_until_complete(playwright.stop())
        served.stop()
        app.stop()


def _terminal_counts(served: Served) -> list[int]:
    """How many orders are terminal, read through the dashboard's own ports."""

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


def _undone(served: Served, order_id: str) -> list[str]:
    """The compensating actions the order's compensation log names, through the dashboard's ports."""

    def actions(picture: object) -> list[str]:
        return [e.Action for e in picture.ports.compensation_log.entries(order_id)]  # type: ignore[attr-defined]

    return asyncio.run_coroutine_threadsafe(served.dashboard.run(actions), served.loop).result(30)


async def _screenshot(page: Any, name: str, *, full_page: bool) -> None:
    folder = os.environ.get("SAS_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(Path(folder) / name), full_page=full_page)
