"""End to end in a real browser against ``cooplab up`` with a real worker: create the quick-start
experiment through the form, reload it from the URL, launch it, watch the team-reward curve appear on
its own, keep the run across a refresh, a page switch and Back, get "not found" for an unknown run,
download two files in quick succession, read both agents' turns in a transcript, stop the run, resume
it (its header continuing from the checkpoint's step) and see one joined curve, find Compare taking its
two attempts for one run (never two seeds), open a run from the runs table with a click on its row; every request
the page makes goes to the dashboard's own server.
Screenshots go to the folder printed at the start."""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

APP = '[data-testid="stApp"]'
TEAM_REWARD = "reward_mean per turn"
# the animation a loading placeholder (Streamlit's stSkeleton) gets on this page ("none": kept still)
STILL_PLACEHOLDER_JS = """() => { const d = document.createElement('div'); d.setAttribute('data-testid', 'stSkeleton');
  d.style.animation = 'pulse 1s infinite'; document.body.appendChild(d);
  const name = getComputedStyle(d).animationName; d.remove(); return name; }"""

# Per chart: its title (without the markup the theme wraps it in), per trace its x values, the text
# of its annotations, and how far down its frame it is.
CHARTS_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(c => ({
  title: (((c.layout || {}).title || {}).text || '').replace(/<[^>]*>/g, ''),
  xs: (c.data || []).map(t => [...(t.x || [])]),
  notes: ((c.layout || {}).annotations || []).map(a => a.text),
  top: c.getBoundingClientRect().top,
}))"""


def _settle(page) -> None:
    """Wait until Streamlit has finished the rerun an interaction started: see it start (a busy
    machine may take a while to send it), then see it end."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):  # it may have started and ended between two polls
        page.wait_for_selector(f'{APP}[data-test-script-state="running"]', timeout=3_000)
    page.wait_for_selector(f'{APP}[data-test-script-state="notRunning"]', timeout=60_000)


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


def _charts(page) -> list[dict]:
    """The charts of the page in the order they are shown: Streamlit's, and those of a live run, each
    in its own frame (``app.components.live_chart``)."""
    from playwright.sync_api import Error as PlaywrightError

    charts = []
    for frame in page.frames:
        try:
            offset = 0.0 if frame == page.main_frame else (frame.frame_element().bounding_box() or {"y": 1e9})["y"]
            charts += [{**chart, "top": chart["top"] + offset} for chart in frame.evaluate(CHARTS_JS)]
        except PlaywrightError:  # a frame detached meanwhile (a poll redrew the page)
            continue
    return sorted(charts, key=lambda chart: chart["top"])


def _team_reward_points(page) -> int:
    """Points of the team-reward chart's longest line (0 while it is not drawn)."""
    lengths = [len(xs) for chart in _charts(page) if chart["title"].startswith(TEAM_REWARD) for xs in chart["xs"]]
    return max(lengths, default=0)


def _wait_until(predicate, timeout: float, what: str, page=None, shot: Path | None = None) -> None:
    """Poll ``predicate``; with a page, wait through Playwright so its events (downloads) are delivered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if page is not None:
            page.wait_for_timeout(500)
        else:
            time.sleep(0.5)
    if page is not None and shot is not None:
        page.screenshot(path=str(shot), full_page=True)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_the_researchers_loop_in_a_browser(cooplab_up: str, browser_page, artifacts: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)  # two shared cores: reruns can take a few seconds
    page, url = browser_page, cooplab_up
    own = urlsplit(url).netloc
    requests: list[str] = []
    page.context.on("request", lambda request: requests.append(request.url))
    page.context.on("websocket", lambda socket: requests.append(socket.url))
    started = time.monotonic()

    def shot(name: str) -> None:
        page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)

    # 1. first visit: the quick-start button creates the experiment; the URL names it
    page.goto(url)
    page.get_by_role("button", name="Create the quick-start experiment").click()
    expect(page.get_by_text("Created experiment 'quickstart'")).to_be_visible()
    _settle(page)  # the form is redrawn for the new experiment: type only into the new widgets
    expect(page).to_have_url(re.compile(r"\?experiment=1$"))
    expect(page.get_by_text("Unsaved changes")).to_have_count(0)  # untouched: nothing to save
    # more steps than the preset, so the run is still training when we stop it
    steps = page.get_by_role("spinbutton", name="max_steps", exact=True)
    steps.fill("3000")
    steps.press("Tab")
    _settle(page)
    expect(page.get_by_text(re.compile(r"Unsaved changes: .*trainer\.max_steps"))).to_be_visible()
    save = page.get_by_role("button", name="Save changes")
    expect(save).to_be_enabled()
    save.click()
    expect(page.get_by_text("Saved experiment 'quickstart'")).to_be_visible()
    expect(page.get_by_text("Unsaved changes")).to_have_count(0)

    # 2. a refresh reopens the experiment from the URL; the action bar stays in view while scrolling
    page.reload()
    expect(page.get_by_role("heading", name="Edit experiment #1")).to_be_visible()
    expect(page.get_by_role("spinbutton", name="max_steps", exact=True)).to_have_value("3000")
    page.mouse.move(800, 600)  # over the form, not the sidebar
    page.mouse.wheel(0, 2500)
    launch = page.get_by_role("button", name="Launch run")
    _wait_until(lambda: (box := launch.bounding_box()) is not None and 0 <= box["y"] <= 1000, 10,
                "the Launch button to stay in view (sticky action bar)", page, artifacts / "fail-2-sticky.png")
    shot("1-experiment-form-scrolled")

    # 3. launch; the link opens the run's page in the same session
    launch.click()
    queued = page.get_by_text(re.compile(r"Queued run #\d+ on cpu"))
    expect(queued).to_be_visible()
    run_id = int(re.search(r"#(\d+)", queued.inner_text()).group(1))
    shot("2-launched")
    page.get_by_role("link", name=f"Watch run #{run_id}").click()
    expect(page).to_have_url(re.compile(rf"/run_detail\?run={run_id}$"))

    # 4. the team-reward curve appears on its own (the page opened before the first step) and grows
    # a liveness wait, not a speed check: alone the first points come in about 10 s, but in the suite's
    # parallel phase three test processes share two cores with this run's worker (one wait passed 180 s)
    _wait_until(lambda: _team_reward_points(page) >= 2, 360, "the team-reward curve", page,
                artifacts / "fail-4-chart.png")
    assert _charts(page)[0]["title"].startswith(TEAM_REWARD)  # first on the page
    first = _team_reward_points(page)
    _wait_until(lambda: _team_reward_points(page) > first, 90, "the team-reward curve to gain points", page,
                artifacts / "fail-4-chart.png")
    shot("3-live-chart")

    # 5. refresh keeps the run; the sidebar's Transcripts link keeps it; Back returns to it
    page.reload()
    expect(page).to_have_url(re.compile(rf"\?run={run_id}$"))
    expect(page.get_by_role("combobox", name="run")).to_have_value(re.compile(rf"^#{run_id} quickstart"))
    page.get_by_test_id("stSidebar").get_by_role("link", name="Transcripts").click()
    expect(page).to_have_url(re.compile(rf"/transcripts\?run={run_id}$"))
    bubbles = page.locator('[data-testid="stChatMessage"]')
    expect(bubbles.first).to_be_visible(timeout=60_000)
    expect(bubbles.filter(has_text="first").first).to_be_visible()
    expect(bubbles.filter(has_text="second").first).to_be_visible()
    shot("4-transcript")
    page.go_back()
    expect(page).to_have_url(re.compile(rf"/run_detail\?run={run_id}$"))
    expect(page.get_by_role("combobox", name="run")).to_have_value(re.compile(rf"^#{run_id} quickstart"))

    # 6. an unknown run says so, with a way back to the list (never another run)
    page.goto(f"{url}/run_detail?run=999")
    expect(page.get_by_text("run 999 not found")).to_be_visible()
    expect(page.get_by_role("link", name="Go to the runs list")).to_be_visible()
    expect(page).to_have_url(re.compile(r"\?run=999$"))
    shot("5-not-found")

    # 7. downloads clicked in quick succession all arrive (Streamlit's deferred downloads answered the
    # second one with 404)
    page.goto(f"{url}/run_detail?run={run_id}")
    _settle(page)
    # Streamlit's loading placeholders are kept still: a pulse composited in software 60 times a second was
    # most of a page load's browser CPU (docs/dashboard.md, "Opening a page")
    assert page.evaluate(STILL_PLACEHOLDER_JS) == "none"
    page.get_by_role("tab", name="Checkpoints & downloads").click()
    csv_link = page.get_by_role("link", name="metrics CSV")
    jsonl_link = page.get_by_role("link", name="metrics JSONL")
    expect(csv_link).to_be_visible()
    _settle(page)

    got = []
    page.on("download", lambda download: got.append(download))
    with page.expect_download(timeout=30_000):
        csv_link.click()
    jsonl_link.click()  # right away: within a second of the first download
    csv_link.click()
    _wait_until(lambda: len(got) == 3, 60, "three downloads", page, artifacts / "fail-7-downloads.png")
    files = [(d.suggested_filename, Path(d.path()).read_text()) for d in got]  # path(): waits for the file
    assert sorted(name for name, _ in files) == [f"run{run_id}-metrics.csv", f"run{run_id}-metrics.csv",
                                                 f"run{run_id}-metrics.jsonl"]
    for name, text in files:
        if name.endswith(".csv"):
            assert text.startswith("key,step,env_step,value,wall_time\n") and "train/reward_mean" in text
        else:
            assert '"key": "train/reward_mean"' in text
    assert all(d.failure() is None for d in got)
    shot("6-downloads")

    # 8. stop: the header shows stopping, then the truthful final state
    page.get_by_role("tab", name="Charts").click()
    _click_when_steady(page.get_by_test_id("stButton").get_by_role("button", name="Stop"), timeout=60)
    status = page.locator('[data-testid="stMetricValue"]').first
    expect(status).to_contain_text("stopp", timeout=15_000)
    expect(status).to_contain_text("stopped", timeout=90_000)
    step_text = page.locator('[data-testid="stMetricValue"]').nth(1).inner_text()  # "195/3000"
    stopped_at = int(step_text.split("/")[0])
    shot("7-stopped")

    # 9. resume: the new attempt continues from the checkpoint, and the page shows ONE joined curve
    _click_when_steady(page.get_by_test_id("stButton").get_by_role("button", name="Resume"), timeout=60)
    expect(page).not_to_have_url(re.compile(rf"\?run={run_id}$"))  # the page follows the new attempt
    resumed = int(re.search(r"run=(\d+)", page.url).group(1))
    assert resumed != run_id
    # while the new attempt starts, its header continues from the checkpoint's step, never "0/3000"
    expect(page.get_by_text(f"attempt 2 · resumed from #{run_id}")).to_be_visible()
    resumed_at = int(page.locator('[data-testid="stMetricValue"]').nth(1).inner_text().split("/")[0])
    assert 0 < resumed_at <= stopped_at + 1, resumed_at

    def joined() -> bool:
        for chart in _charts(page):
            if chart["title"].startswith(TEAM_REWARD) and any(n.startswith("attempt 2") for n in chart["notes"]):
                xs = chart["xs"][0]
                return max(xs) > stopped_at and xs == sorted(set(xs))  # one curve, each step once
        return False

    _wait_until(joined, 180, "the joined curve of the resumed run", page, artifacts / "fail-9-joined.png")
    expect(page.get_by_text(re.compile(rf"attempt 1 #{run_id} .*attempt 2 #{resumed}"))).to_be_visible()
    shot("8-resumed-joined")
    _click_when_steady(page.get_by_test_id("stButton").get_by_role("button", name="Stop"), timeout=60)
    expect(page.locator('[data-testid="stMetricValue"]').first).to_contain_text("stopp", timeout=15_000)

    # 9b. Compare: the two attempts are one run, not two seeds of it (nothing else to compare yet)
    page.goto(f"{url}/compare")
    expect(page.get_by_text("the attempts of one resumed run count as one")).to_be_visible()
    expect(page.get_by_text("2 seeds")).to_have_count(0)
    shot("8b-compare-one-history")

    # 10. the runs table: both attempts listed; a click on a cell of a row opens that run
    page.goto(f"{url}/runs")
    table = page.get_by_test_id("stDataFrame").first
    expect(table).to_be_visible()
    _settle(page)
    shot("9-runs-table")
    box = table.bounding_box()
    page.mouse.click(box["x"] + 150, box["y"] + 55)  # the status cell of the first row (the newest run)
    expect(page).to_have_url(re.compile(rf"/run_detail\?run={resumed}$"))

    # 11. every request went to the dashboard's own server (no font host, no favicon host, no CDN)
    foreign = sorted({u for u in requests if urlsplit(u).scheme in ("http", "https", "ws", "wss")
                      and urlsplit(u).netloc != own})
    assert requests and not foreign, foreign
    print(f"\nbrowser test: {len(requests)} requests, all to {own}; {time.monotonic() - started:.0f} s")
