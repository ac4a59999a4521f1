"""Navigation: the entry point routes to every page, and the picked run follows the user across pages."""

from __future__ import annotations

from db.store import Store

TITLES = {"experiments": "Experiments", "runs": "Runs", "run_detail": "Run detail", "transcripts": "Transcripts",
          "compare": "Compare runs", "workers": "Workers"}


def test_every_page_renders_from_the_entry_point(app, store: Store, experiment: int, seed) -> None:
    seed(experiment, status="running", steps=2, episodes_per_step=1)
    at = app()
    assert at.title[0].value == "Experiments"  # the default page
    for page, title in TITLES.items():
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, page
        assert at.title[0].value == title
    assert at.sidebar.toggle(key="live_refresh").value is True


def test_picked_run_follows_across_pages(app, store: Store, experiment: int, seed) -> None:
    first = seed(experiment, status="succeeded", steps=1)
    second = seed(experiment, status="succeeded", steps=1)
    at = app("runs")
    at.selectbox(key="runs_pick").set_value(first).run()
    assert at.query_params["run"] == str(first)  # shareable link to this run
    at.switch_page("app_pages/run_detail.py").run()
    assert at.selectbox(key="detail_pick").value == first
    at.selectbox(key="detail_pick").set_value(second).run()
    at.switch_page("app_pages/transcripts.py").run()
    assert at.selectbox(key="tr_pick").value == second


def test_deep_link_to_a_run(app, store: Store, experiment: int, seed) -> None:
    seed(experiment, status="succeeded", steps=1)
    older = seed(experiment, status="failed", steps=1)
    seed(experiment, status="succeeded", steps=1)
    at = app("run_detail", run=older)
    assert at.selectbox(key="detail_pick").value == older
    assert any(m.value == ":red[:material/error: failed]" for m in at.metric)
