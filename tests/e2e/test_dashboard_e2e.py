"""End to end in a real browser against ``cooplab up`` with a real worker: create the quick-start
experiment through the form, launch it, watch the live chart gain points, read both agents' turns in
a transcript, stop the run and see ``stopped``. Screenshots go to the folder printed at the start."""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

POINTS_JS = """() => {
  const charts = [...document.querySelectorAll('.js-plotly-plot')];
  const counts = charts.flatMap(c => (c.data || []).map(t => (t.x || []).length));
  return counts.length ? Math.max(...counts) : 0;
}"""


APP = '[data-testid="stApp"]'


def _settle(page) -> None:
    """Wait until Streamlit has finished the rerun an interaction started: see it start (a busy
    machine may take a while to send it), then see it end."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):  # it may have started and ended between two polls
        page.wait_for_selector(f'{APP}[data-test-script-state="running"]', timeout=3_000)
    page.wait_for_selector(f'{APP}[data-test-script-state="notRunning"]')


def _click_when_steady(locator, timeout: float) -> None:
    """Click a button that a busy page may redraw meanwhile: retry short clicks until one lands."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    deadline = time.monotonic() + timeout
    while True:
        try:
            locator.click(timeout=5_000)
            return
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise


def _points(page) -> int:
    return int(page.evaluate(POINTS_JS))


def _wait_until(predicate, timeout: float, what: str, page=None, shot: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    if page is not None and shot is not None:
        page.screenshot(path=str(shot), full_page=True)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_quickstart_from_form_to_stopped(cooplab_up: str, browser_page, artifacts: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # two shared cores: reruns can take a few seconds
    page, url = browser_page, cooplab_up

    # 1. first visit: the quick-start button creates the experiment and opens it in the form
    page.goto(url)
    page.get_by_role("button", name="Create the quick-start experiment").click()
    expect(page.get_by_text("Created experiment 'quickstart'")).to_be_visible()
    _settle(page)  # the form is redrawn for the new experiment: type only into the new widgets
    # more steps than the preset, so the run is still training when we stop it
    steps = page.get_by_role("spinbutton", name="max_steps", exact=True)
    steps.fill("400")
    steps.press("Tab")
    _settle(page)
    save = page.get_by_role("button", name="Save changes")
    expect(save).to_be_enabled()
    save.click()
    expect(page.get_by_text("Saved experiment 'quickstart'")).to_be_visible()
    # the form reloads what was stored
    expect(page.get_by_role("spinbutton", name="max_steps", exact=True)).to_have_value("400")
    expect(page.get_by_text("unsaved changes")).to_have_count(0)
    page.screenshot(path=str(artifacts / "1-experiment-form.png"), full_page=True)

    # 2. launch through the job client; the embedded worker picks it up
    page.get_by_role("button", name="Launch run").click()
    queued = page.get_by_text(re.compile(r"Queued run #\d+ on cpu"))
    expect(queued).to_be_visible()
    run_id = int(re.search(r"#(\d+)", queued.inner_text()).group(1))
    page.screenshot(path=str(artifacts / "2-launched.png"), full_page=True)

    # 3. the live chart gains points without reloading the page
    page.goto(f"{url}/run_detail?run={run_id}")
    _wait_until(lambda: _points(page) >= 2, 120, "the first points of the live chart", page,
                artifacts / "fail-3-chart.png")
    first = _points(page)
    _wait_until(lambda: _points(page) > first, 60, "the live chart to gain points", page,
                artifacts / "fail-3-chart.png")
    page.screenshot(path=str(artifacts / "3-live-chart.png"), full_page=True)

    # 4. a transcript shows both agents' turns with their role names
    page.goto(f"{url}/transcripts?run={run_id}")
    bubbles = page.locator('[data-testid="stChatMessage"]')
    expect(bubbles.first).to_be_visible(timeout=60_000)
    expect(bubbles.filter(has_text="first").first).to_be_visible()
    expect(bubbles.filter(has_text="second").first).to_be_visible()
    page.screenshot(path=str(artifacts / "4-transcript.png"), full_page=True)

    # 5. stop: the header shows stopping, then the truthful final state
    page.goto(f"{url}/run_detail?run={run_id}")
    _settle(page)
    _click_when_steady(page.get_by_test_id("stButton").get_by_role("button", name="Stop"), timeout=60)
    status = page.locator('[data-testid="stMetricValue"]').first
    expect(status).to_contain_text("stopp", timeout=15_000)
    page.screenshot(path=str(artifacts / "5-stopping.png"), full_page=True)
    expect(status).to_contain_text("stopped", timeout=60_000)
    page.screenshot(path=str(artifacts / "6-stopped.png"), full_page=True)
