"""Navigation: the entry point routes to every page, and the picked run follows the user across pages."""

from __future__ import annotations

from db.store import Store

STILL_PLACEHOLDERS = '<style>[data-testid="stSkeleton"] { animation: none !important; }</style>'
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
        # Streamlit's loading placeholders are kept still on every page: their pulse, composited 60 times a
        # second in software, was most of a page load's browser CPU (docs/dashboard.md, "Opening a page")
        assert STILL_PLACEHOLDERS in [el.proto.body for el in at.get("html")], page
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


def test_a_run_page_writes_its_run_into_the_url_and_keeps_it_across_pages(app, store: Store, experiment: int,
                                                                          seed) -> None:
    older = seed(experiment, status="succeeded", steps=1, episodes_per_step=1)
    seed(experiment, status="succeeded", steps=1, episodes_per_step=1)
    at = app("run_detail", run=older)  # e.g. the "Watch run" link
    # the sidebar's links carry no query string: the session remembers the run and puts it back in the URL
    at.query_params.clear()
    at.switch_page("app_pages/transcripts.py").run()
    assert at.selectbox(key="tr_pick").value == older
    assert at.query_params["run"] == str(older)
    at.query_params.clear()
    at.switch_page("app_pages/run_detail.py").run()
    assert at.selectbox(key="detail_pick").value == older and at.query_params["run"] == str(older)


def test_a_run_page_without_a_run_in_the_url_names_the_one_it_shows(app, store: Store, experiment: int,
                                                                    seed) -> None:
    seed(experiment, status="succeeded", steps=1)
    newest = seed(experiment, status="succeeded", steps=1)
    at = app("run_detail")
    assert at.selectbox(key="detail_pick").value == newest
    assert at.query_params["run"] == str(newest)  # a refresh keeps it


def test_sidebar_links_carry_the_selected_run_and_experiment(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=1)
    at = app("run_detail", run=run_id)
    at.run()  # the sidebar is drawn before the page: the next run's links know the run
    links = {link.proto.label: link.proto.query_string for link in at.sidebar.get("page_link")}
    assert links["Transcripts"] == links["Run detail"] == links["Runs"] == f"run={run_id}"
    assert links["Workers"] == ""
    at.switch_page("app_pages/experiments.py").run()
    at.selectbox(key="exp_pick").set_value(experiment).run()
    at.run()
    links = {link.proto.label: link.proto.query_string for link in at.sidebar.get("page_link")}
    assert links["Experiments"] == f"experiment={experiment}"
