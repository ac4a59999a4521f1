"""The runs table and a study's parameters in a real browser against the shared ``cooplab up``: the table
fits a 1400 px window beside the sidebar (it overflowed before), a column chosen in it is there again in
another browser (a saved view), two ticked runs open Compare overlaid, and a finished study draws its
parallel-coordinates chart and parameter importance.

The runs are a 2 × 2 study (learning rate × seed) written through the store as succeeded, under a name
of this file's own (the dashboard is shared), so nothing trains. Screenshots: ``runs-table-*.png``."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests.e2e.conftest import create_quickstart
from tests.e2e.test_dashboard_e2e import _settle

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

LR = "trainer.agent_learning_rate"
TABLE = '[data-testid="stDataFrame"]'
# the runs table's width against its frame's, and the page's against the window's
WIDTHS_JS = """() => {
  const scroller = document.querySelector('[data-testid="stDataFrame"] .dvn-scroller');
  return {table: scroller.scrollWidth, frame: scroller.clientWidth,
          page: document.documentElement.scrollWidth, window: window.innerWidth};
}"""
HEADERS_JS = """() => [...document.querySelectorAll('[data-testid="stDataFrame"] th')]
  .map(th => th.textContent.trim()).filter(Boolean)"""
TRACES_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(c => (c.data || []).map(t => ({
  type: t.type, name: t.name || '', labels: (t.dimensions || []).map(d => d.label)})))"""


def _finished_study(home: Path, name: str) -> tuple[int, list[int]]:
    """A finished 2 × 2 study of the quick start, its runs succeeded with two logged steps; (study, runs)."""
    from db import states
    from db.study_store import StudyStore
    from jobs.client import get_store
    from jobs.settings import Settings
    from jobs.study_space import generate, parse_space

    store = get_store(Settings(home=home))
    base = dict(store.get_experiment(create_quickstart(home, name)).config)
    space = {LR: [0.001, 0.01]}
    studies = StudyStore(store)
    study = studies.create_study(f"{name} sweep", {"base": base, "space": space, "objective": "train/reward_mean"},
                                 generate(base, parse_space(space), seeds=2), max_concurrent=4)
    runs = []
    for run_id in studies.claim_slots(study.id):
        trial = studies.trial_of_run(run_id)
        store.transition(run_id, states.STARTING)
        store.transition(run_id, states.RUNNING)
        for step in (1, 2):
            store.log_step(run_id, step, step, {"train/reward_mean": (0.2 + trial.point / 2 + trial.seed_index / 5)
                                                * step / 2})
        store.transition(run_id, states.SUCCEEDED)
        runs.append(run_id)
    studies.set_status(study.id, "finished")
    return study.id, runs


def _filter_experiment(page, experiment: int) -> None:
    box = page.get_by_role("combobox", name="experiment")
    box.click()
    box.fill(f"#{experiment} ")
    box.press("Enter")
    _settle(page)


def _shows_column(page, column: str) -> None:
    page.wait_for_function(f"() => ({HEADERS_JS})().includes({column!r})")


def columns_kept(page, url: str, home: Path, run_id: int, shot) -> None:
    """A config column chosen for one experiment's runs is there again in another browser (the choice is
    kept in the store per experiment filter; this experiment is this file's own)."""
    from jobs.client import get_store
    from jobs.settings import Settings

    experiment = get_store(Settings(home=home)).get_run(run_id).experiment_id
    _filter_experiment(page, experiment)
    page.get_by_role("button", name="Columns", exact=True).click()
    picker = page.get_by_role("combobox", name="config columns")
    picker.click()
    picker.fill(LR)
    picker.press("Enter")
    _settle(page)
    page.keyboard.press("Escape")  # the options list
    page.get_by_role("heading", name="Runs").click()  # outside the popover: it closes
    _settle(page)
    _shows_column(page, LR)
    shot("1b-column-chosen")
    other = page.context.browser.new_context(viewport=page.viewport_size)  # another browser: a new session
    try:
        fresh = other.new_page()
        fresh.goto(f"{url}/runs")
        _settle(fresh)
        _filter_experiment(fresh, experiment)
        _shows_column(fresh, LR)
    finally:
        other.close()


def test_runs_table_fits_and_opens_compare_and_a_study_shows_its_parameters(shared_up, browser_page,
                                                                           artifacts: Path) -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    (url, home), page = shared_up, browser_page
    name = f"table {uuid.uuid4().hex[:8]}"
    study_id, runs = _finished_study(home, name)
    assert len(runs) == 4

    def shot(label: str) -> None:
        page.screenshot(path=str(artifacts / f"runs-table-{label}.png"), full_page=True)

    # the table, searched down to this file's runs, fits the window beside the sidebar
    page.goto(f"{url}/runs")
    search = page.get_by_role("textbox", name="search")
    search.fill(name)
    search.press("Enter")
    _settle(page)
    expect(page.get_by_text("4 runs, sorted by run over all of them.")).to_be_visible()
    table = page.locator(TABLE).first
    expect(table).to_be_visible()
    widths = page.evaluate(WIDTHS_JS)
    assert widths["table"] <= widths["frame"] and widths["page"] <= widths["window"] == 1400, widths
    shot("1-fits")
    columns_kept(page, url, home, runs[0], shot)

    # tick the first two rows (the newest runs), then Compare overlays exactly them
    box = table.bounding_box()
    for row in (1, 2):
        page.mouse.click(box["x"] + 15, box["y"] + 35 * row + 18)  # the row's box, left of the run column
        _settle(page)
    newest = sorted(runs, reverse=True)[:2]
    expect(page.get_by_text(f"Selected for Compare: #{newest[0]}, #{newest[1]}")).to_be_visible()
    page.get_by_role("button", name="Compare selected (2)").click()
    expect(page.get_by_role("heading", name="Compare runs")).to_be_visible()
    expect(page).to_have_url(re.compile(rf"/compare\?runs={newest[0]}(%2C|,){newest[1]}$"))

    def overlaid() -> bool:
        names = [t["name"] for t in page.evaluate(TRACES_JS) if t["type"].startswith("scatter")]
        return all(any(f"#{run}" in n for n in names) for run in newest) and not any(
            f"#{run}" in n for n in names for run in runs if run not in newest)

    expect(page.locator(".js-plotly-plot").first).to_be_visible()
    page.wait_for_function(f"() => ({TRACES_JS})().filter(t => t.type.startsWith('scatter')).length >= 2")
    assert overlaid(), page.evaluate(TRACES_JS)
    shot("2-compare")

    # the study's parameters: parallel coordinates (the learning rate, then the objective) and importance
    page.goto(f"{url}/studies?study={study_id}")
    page.get_by_role("tab", name="Watch and results").click()
    expect(page.get_by_text(f"{name} sweep · finished · 4 succeeded")).to_be_visible()
    page.get_by_role("tab", name="Parameters and importance").click()
    expect(page.get_by_text(re.compile("fraction of the objective's variance explained"))).to_be_visible()
    page.wait_for_function(f"() => ({TRACES_JS})().some(t => t.type === 'parcoords')")
    [parcoords] = [t for t in page.evaluate(TRACES_JS) if t["type"] == "parcoords"]
    assert parcoords["labels"] == [LR, "train/reward_mean"]
    shot("3-parameters")
