"""A study in a real browser against ``cooplab up`` with a real worker: define it from the quick-start
experiment (random points of the learning rate around the experiment's own, every config validated), queue it, watch
its children finish, read its results and promote the best point to a new experiment.
Screenshots go to the folder printed at the start (``study-*.png``)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import create_quickstart
from tests.e2e.test_dashboard_e2e import _settle

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]


def test_define_watch_and_promote_a_study(shared_up, browser_page, artifacts: Path) -> None:
    from playwright.sync_api import expect

    from jobs.client import get_store
    from jobs.settings import Settings

    expect.set_options(timeout=30_000)
    (url, home), page = shared_up, browser_page

    def shot(name: str) -> None:
        page.screenshot(path=str(artifacts / f"study-{name}.png"), full_page=True)

    # the quick-start experiment (under a name of its own: the dashboard is shared), shortened to two
    # steps a run
    base_name = f"quickstart {uuid.uuid4().hex[:8]}"
    base = create_quickstart(home, base_name)
    page.goto(f"{url}/?experiment={base}")
    expect(page.get_by_role("heading", name=f"Edit experiment #{base}")).to_be_visible()
    _settle(page)
    steps = page.get_by_role("spinbutton", name="max_steps", exact=True)
    steps.fill("2")
    steps.press("Tab")
    _settle(page)
    page.get_by_role("button", name="Save changes").click()
    expect(page.get_by_text(f"Saved experiment '{base_name}'")).to_be_visible()

    # define, from this experiment: three learning rates around its own (a grid of 3 x 2 seeds), then two
    # random points of them with one seed each
    page.goto(f"{url}/studies")
    pick = page.get_by_role("combobox", name="base experiment")
    expect(pick).to_be_visible()
    if pick.input_value() != base_name:
        pick.click()
        page.get_by_role("option", name=base_name, exact=True).click()
        _settle(page)
    expect(pick).to_have_value(base_name)
    expect(page.get_by_role("textbox", name="study name")).to_have_value(f"{base_name} sweep")
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
    expect(page.get_by_text(f"Study '{base_name} sweep' queued: 2 runs")).to_be_visible()

    # watch until every child ended; the results table and the charts follow live, without a reload
    page.get_by_role("tab", name="Watch and results").click()
    expect(page.get_by_text(f"{base_name} sweep · finished · 2 succeeded")).to_be_visible(timeout=300_000)
    best = page.get_by_text(re.compile(r"Best point by mean final train/reward_mean: point \d"))
    expect(best).to_be_visible()
    point = int(re.search(r"point (\d+)", best.inner_text()).group(1))
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
    # a new experiment: neither the base nor the study's own (which holds its runs)
    promoted = get_store(Settings(home=home)).find_experiment(f"{base_name} sweep: point {point}")
    assert promoted is not None and promoted.id > base
    expect(page).to_have_url(re.compile(rf"\?experiment={promoted.id}$"))
    expect(page.get_by_role("heading", name=f"Edit experiment #{promoted.id}")).to_be_visible()
    shot("3-promoted")
