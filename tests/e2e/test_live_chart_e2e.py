"""A live run's metric chart appends in a real browser (issue 45, "charts that append"): the run page of
a running run draws each chart once, all of them in one frame (``app.components.live_chart``: one
``plotly.min.js`` run per page), and each poll adds only the new points to that same plot
(``Plotly.extendTraces``) instead of redrawing the figure; once the run has ended its charts are
Streamlit's static ones.

The run is written through the store (running, its steps logged by this test, with heartbeats) on the
shared ``cooplab up``, under a name of this file's own, so nothing trains. Screenshots:
``live-chart-*.png``."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import create_quickstart
from tests.e2e.test_dashboard_e2e import _wait_until

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

FRAME = 'iframe[title="app.components.live_chart.live_chart"]'
TEAM_REWARD = "reward_mean per turn"
# what the component writes on its plot div, and the plot itself
STATE_JS = """d => ({draws: +d.dataset.fullDraws, appends: +d.dataset.appends, points: +d.dataset.points,
  title: ((d.layout || {}).title || {}).text || '', last: (d.data || []).map(t => t.x[t.x.length - 1]),
  kept: d.__kept === 'this plot'})"""


def _log(store, run_id: int, steps: range) -> None:
    for step in steps:
        store.log_step(run_id, step, step * 4, {"train/reward_mean": 0.01 * step, "turn_1/reward_mean": 0.01 * step,
                                                "agent/first/loss": 1.0 / step}, wall_time=1.7e9 + step)
    store.heartbeat(run_id)


def test_a_live_chart_grows_by_appending_without_a_redraw(shared_up, browser_page, artifacts: Path) -> None:
    from db import states
    from jobs.client import get_store
    from jobs.settings import Settings

    url, home = shared_up
    page = browser_page
    store = get_store(Settings(home=home))
    experiment = create_quickstart(home, f"live-chart-{uuid.uuid4().hex[:8]}")
    run_id = store.create_run(experiment, dict(store.get_experiment(experiment).config), "cpu", total_steps=400).id
    store.transition(run_id, states.STARTING)
    store.transition(run_id, states.RUNNING)
    _log(store, run_id, range(1, 21))

    page.goto(f"{url}/run_detail?run={run_id}")
    frame = page.frame_locator(FRAME).first
    chart = frame.locator('[data-testid="liveChart"]').first
    frame.locator('[data-testid="liveChart"][data-full-draws="1"]').first.wait_for(timeout=120_000)
    first = chart.evaluate(STATE_JS)
    assert first["title"].replace("<b>", "").startswith(TEAM_REWARD), first  # the first chart: the team reward
    assert first["last"] and all(x == 20 for x in first["last"])
    chart.evaluate("d => { d.__kept = 'this plot'; }")  # gone if the frame or the plot were made anew
    assert not page.locator(".js-plotly-plot").count()  # no chart of the page is redrawn by Streamlit
    _wait_until(lambda: frame.locator('[data-testid="liveChart"] .main-svg').count() >= 2, 60,
                "the second live chart", page, artifacts / "live-chart-fail-second.png")
    assert page.locator(FRAME).count() == 1  # every live chart of the page in one frame

    seen = [first]
    for end in (30, 40):
        _log(store, run_id, range(seen[-1]["last"][0] + 1, end + 1))
        _wait_until(lambda end=end: chart.evaluate(STATE_JS)["last"][0] == end, 90,
                    f"the chart to reach step {end}", page, artifacts / "live-chart-fail.png")
        seen.append(chart.evaluate(STATE_JS))
    page.screenshot(path=str(artifacts / "live-chart-grown.png"), full_page=True)
    assert [s["points"] for s in seen] == sorted({s["points"] for s in seen})  # it grew at each step
    assert seen[-1]["points"] == first["points"] * 2  # 20 steps, then 40: every point once
    assert seen[-1]["draws"] == 1 and seen[-1]["appends"] >= 2, seen  # appended, never redrawn
    assert seen[-1]["kept"]  # the same plot in the same frame
    # the header's status is redrawn by the charts' poll (the page's one polled region), in its place
    step = page.locator('[data-testid="stMetricValue"]').nth(1)
    _wait_until(lambda: step.inner_text().startswith("40/"), 30, "the header's step to follow the run", page,
                artifacts / "live-chart-fail-header.png")
    assert page.locator('[data-testid="stMetricValue"]').count() == 5  # one status line, not one per poll

    store.transition(run_id, states.SUCCEEDED)  # ended: the page is drawn once, with static charts
    _wait_until(lambda: page.locator(".js-plotly-plot").count() > 0 and not page.locator(FRAME).count(), 90,
                "the ended run's static charts", page, artifacts / "live-chart-fail-ended.png")
    xs = page.evaluate("() => document.querySelector('.js-plotly-plot').data[0].x")
    assert xs[-1] == 40 and len(xs) == 40
