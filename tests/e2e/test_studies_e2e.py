"""A study in a real browser against ``cooplab up`` with a real worker: define it from the quick-start
experiment (random points of the learning rate around the experiment's own, every config validated), queue it, watch
its children finish, read its results and promote the best point to a new experiment.
Screenshots go to the folder printed at the start (``study-*.png``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.test_dashboard_e2e import _settle

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]


def test_define_watch_and_promote_a_study(cooplab_up: str, browser_page, artifacts: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    page, url = browser_page, cooplab_up

    def shot(name: str) -> None:
        page.screenshot(path=str(artifacts / f"study-{name}.png"), full_page=True)

    # the quick-start experiment, shortened to two steps a run
    page.goto(url)
    page.get_by_role("button", name="Create the quick-start experiment").click()
    expect(page.get_by_text("Created experiment 'quickstart'")).to_be_visible()
    _settle(page)
    steps = page.get_by_role("spinbutton", name="max_steps", exact=True)
    steps.fill("2")
    steps.press("Tab")
    _settle(page)
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text("Saved experiment 'quickstart'")).to_be_visible()

    # define: three learning rates around the experiment's own (a grid of 3 x 2 seeds), then two
    # random points of them with one seed each
    page.goto(f"{url}/studies")
    expect(page.get_by_text("3 points × 2 seeds = 6 runs, every config valid")).to_be_visible()
    page.get_by_text("random", exact=True).click()
    _settle(page)
    for name, value in (("random points", "2"), ("seeds per point", "1")):
        box = page.get_by_role("spinbutton", name=name)
        box.fill(value)
        box.press("Tab")
        _settle(page)
    expect(page.get_by_text("2 points × 1 seed = 2 runs, every config valid")).to_be_visible()
    shot("1-define")
    page.get_by_role("button", name="Queue the study").click()
    expect(page.get_by_text("Study 'quickstart sweep' queued: 2 runs")).to_be_visible()

    # watch until every child ended; the results table and the charts follow live, without a reload
    page.get_by_role("tab", name="Watch and results").click()
    expect(page.get_by_text(re.compile(r"quickstart sweep · finished · 2 succeeded"))).to_be_visible(timeout=300_000)
    expect(page.get_by_text(re.compile(r"Best point by mean final train/reward_mean: point \d"))).to_be_visible()
    expect(page.get_by_text("No child has succeeded yet")).to_have_count(0)
    expect(page.get_by_text(re.compile(r"\(active\)"))).to_have_count(0)  # no stale state left anywhere
    expect(page.get_by_role("button", name="Stop all")).to_be_disabled()
    expect(page.get_by_role("button", name="Resume all")).to_be_disabled()
    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    shot("2-results")

    # promote: a new experiment with the best point's config opens in the editor
    page.get_by_role("button", name="Promote to a new experiment").click()
    link = page.get_by_role("link", name="Open the promoted experiment")
    expect(link).to_be_visible()
    link.click()
    # #1 is the quick start, #2 the study's own experiment (its runs), #3 the promoted point
    expect(page).to_have_url(re.compile(r"\?experiment=3$"))
    expect(page.get_by_role("heading", name="Edit experiment #3")).to_be_visible()
    shot("3-promoted")
