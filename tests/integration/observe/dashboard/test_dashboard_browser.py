"""The dashboard in a real headless Chromium, on the fleet `eagle-eye up` runs, under load."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from dashboard_harness import CHROMIUM, CHROMIUM_ARGS, UpProcess, apply_load, chromium_available

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_available(), reason="needs Debian's chromium"),
]
sync_api = pytest.importorskip("playwright.sync_api")

SCREENSHOT_DIR_ENV = "EAGLE_EYE_SCREENSHOT_DIR"
"""Set to a folder to keep the screenshots (docs/img is made this way)."""


@pytest.fixture
def up() -> Iterator[UpProcess]:
    """`eagle-eye up` with three simulated engines (one slower), NATS and the router."""
    process = UpProcess(engines=3)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def page() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page
            assert errors == [], f"JavaScript errors on the page: {errors}"
        finally:
            browser.close()


def keep(path: Path) -> None:
    folder = os.environ.get(SCREENSHOT_DIR_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)


def chart_max(page: Any, chart: str) -> float:
    """Largest value any series of a chart currently holds (0 when empty)."""
    value: float = page.evaluate(
        """(id) => {
            const c = window.eagleEye.charts[id];
            if (!c) return 0;
            let m = 0;
            for (const col of c.plot.data.slice(1)) for (const v of col) if (v > m) m = v;
            return m;
        }""",
        chart,
    )
    return value


def test_dashboard_of_eagle_eye_up_follows_load_through_the_router(
    up: UpProcess, page: Any, tmp_path: Path
) -> None:
    page.goto(f"{up.router_url}/dashboard")  # redirects to /dashboard/
    assert page.url.endswith("/dashboard/")
    page.wait_for_function(
        "window.eagleEye.lastFrame && window.eagleEye.lastFrame.instances.length === 3"
        " && window.eagleEye.frames >= 3",
        timeout=15_000,
    )
    rows = page.locator("#instances tbody tr")
    assert rows.count() == 3
    assert sorted(rows.nth(i).get_attribute("data-key") for i in range(3)) == [
        "sim-0",
        "sim-1",
        "sim-2",
    ]
    assert page.locator("#banner").is_hidden()  # the chart library is installed
    before = page.evaluate("window.eagleEye.lastFrame")
    assert before["router"]["requests_total"] == 0
    assert chart_max(page, "decisions") == 0
    idle_chart = page.locator("#chart-decisions canvas").screenshot()

    pool = ThreadPoolExecutor(max_workers=1)
    load = pool.submit(asyncio.run, apply_load(up.router_url, requests=240, concurrency=24))
    # Numbers move while the load runs: engines report running requests, the router
    # reports decisions per instance, and the page shows them.
    page.wait_for_function(
        """() => {
            const f = window.eagleEye.lastFrame;
            return f.fleet.running > 0 && f.fleet.decisions_per_s > 0
                && f.instances.filter((r) => r.decisions_per_s > 0).length >= 2;
        }""",
        timeout=20_000,
    )
    busy = page.evaluate("window.eagleEye.lastFrame")
    assert busy["router"]["requests_per_s"] > 0
    decisions_cells = page.locator("#instances tbody td.col-decisions_per_s").all_inner_texts()
    assert any(float(text) > 0 for text in decisions_cells)
    assert page.locator("#cards").inner_text().count("Requests / s") == 1
    assert chart_max(page, "decisions") > 0
    assert chart_max(page, "running") > 0
    assert page.locator("#chart-decisions canvas").screenshot() != idle_chart
    assert load.result(timeout=90) == 240
    pool.shutdown()

    # After the load: client-side latency percentiles are there, and the KV/running
    # charts hold the burst in their history.
    page.wait_for_function(
        """(() => {
            const r = window.eagleEye.lastFrame.router;
            return r.requests_total >= 240 && r.ttft_s.p50 !== null && r.duration_s.p99 !== null;
        })()""",
        timeout=10_000,
    )
    after = page.evaluate("window.eagleEye.lastFrame")["router"]
    assert after["errors_total"] == 0
    assert chart_max(page, "latency") > 0
    cards = page.locator("#cards").inner_text()
    assert "TTFT p50 / p99" in cards and " ms" in cards
    shot = tmp_path / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 20_000
    keep(shot)


def test_table_sorts_by_a_clicked_column(up: UpProcess, page: Any) -> None:
    page.goto(up.dashboard_url)
    page.wait_for_function(
        "window.eagleEye.lastFrame && window.eagleEye.lastFrame.instances.length === 3"
    )
    header = page.locator("#instances th[data-key='key']")
    header.click()  # already sorted by instance: the click inverts it
    page.wait_for_function("document.querySelector('#instances tbody tr').dataset.key === 'sim-2'")
    assert "sorted" in (header.get_attribute("class") or "")


def test_page_says_so_when_the_chart_library_is_missing(up: UpProcess, page: Any) -> None:
    page.route("**/uPlot.iife.min.js", lambda route: route.abort())
    page.goto(up.dashboard_url)
    page.wait_for_function("window.eagleEye && window.eagleEye.frames >= 2")
    banner = page.locator("#banner")
    assert banner.is_visible()
    assert "chart library (uPlot) is not installed" in banner.inner_text()
    assert page.locator("#instances tbody tr").count() == 3  # the numbers still update
    assert page.locator("#chart-running").inner_text().strip().endswith("chart library missing")
