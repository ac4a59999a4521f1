"""Runs page: the table, empty states, and every control going through the real job client."""

from __future__ import annotations

import pytest

from db.store import Store


def test_empty_state_points_to_the_next_step(app) -> None:
    at = app("runs")
    assert not at.exception
    text = " ".join(i.value for i in at.info)
    assert "Create one on the Experiments page" in text and "No runs yet" in text


def test_table_shows_the_columns_a_researcher_scans(app, store: Store, experiment: int, seed) -> None:
    running = seed(experiment, status="running", steps=4)
    queued = seed(experiment, status="queued")
    store.set_run_notes(running, tags=["baseline"], notes="first try\nwith more detail below")
    at = app("runs")
    assert not at.exception
    table = at.dataframe[0].value
    assert len(table) == 2
    assert list(table.columns)[:9] == ["run", "name", "status", "step", "team reward", "trend", "duration",
                                       "tags", "notes"]
    row = table[table["run"] == running].iloc[0]
    assert row["status"] == "● running"  # a text symbol: no emoji font needed
    assert row["step"] == "4/8"
    assert row["team reward"] == "0.400"  # the last logged team reward
    assert list(row["trend"]) == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert row["tags"] == "baseline" and row["notes"] == "first try" and row["name"] == "demo"
    waiting = table[table["run"] == queued].iloc[0]
    assert waiting["team reward"] == "" and waiting["duration"] == ""
    assert "None" not in table.astype(str).to_string()  # never a bare None in a cell


def test_clicking_a_cell_opens_the_run(app, store: Store, experiment: int, seed) -> None:
    first = seed(experiment, status="succeeded", steps=2)
    seed(experiment, status="succeeded", steps=1)
    at = app("runs")
    table = at.dataframe[0]
    row = table.value["run"].tolist().index(first)
    at.session_state[table.key] = {"selection": {"rows": [], "columns": [], "cells": [[row, "run"]]}}
    at.run()
    assert not at.exception
    assert at.title[0].value == "Run detail"
    assert at.query_params["run"] == str(first)
    assert at.selectbox(key="detail_pick").value == first


def test_clicking_any_cell_of_a_row_opens_the_run(app, store: Store, experiment: int, seed) -> None:
    seed(experiment, status="succeeded", steps=2)
    second = seed(experiment, status="succeeded", steps=1)
    at = app("runs")
    table = at.dataframe[0]
    row = table.value["run"].tolist().index(second)
    at.session_state[table.key] = {"selection": {"rows": [], "columns": [], "cells": [[row, "status"]]}}
    at.run()
    assert not at.exception
    assert at.title[0].value == "Run detail" and at.query_params["run"] == str(second)


def test_tag_filter_offers_the_tags_runs_carry(app, store: Store, experiment: int, seed) -> None:
    tagged = seed(experiment, status="succeeded", steps=1)
    seed(experiment, status="succeeded", steps=1)
    store.set_run_notes(tagged, tags=["lr-sweep", "good"])
    at = app("runs")
    assert at.selectbox(key="runs_filter_tag").options == ["(any tag)", "good", "lr-sweep"]
    assert "succeeded: 2" in [c.value for c in at.caption]
    at.selectbox(key="runs_filter_tag").set_value("lr-sweep").run()
    assert at.dataframe[0].value["run"].tolist() == [tagged]
    assert "succeeded: 1" in [c.value for c in at.caption]  # the counts follow the tag filter (were 2)


def test_an_experiments_tags_select_its_runs(app, store: Store, experiment: int, seed, make_config) -> None:
    tagged = store.create_experiment("references", config=make_config("references"), tags=["baseline"]).id
    inside = seed(tagged, status="succeeded", steps=1)  # the run itself carries no tag
    seed(experiment, status="succeeded", steps=1)
    at = app("runs")
    assert at.selectbox(key="runs_filter_tag").options == ["(any tag)", "baseline"]
    at.selectbox(key="runs_filter_tag").set_value("baseline").run()
    assert at.dataframe[0].value["run"].tolist() == [inside]
    assert "succeeded: 1" in [c.value for c in at.caption]
    at.selectbox(key="runs_filter_tag").set_value(None).run()
    at.text_input(key="runs_search").set_value("baseline").run()  # the search counts them as the filter does
    assert at.dataframe[0].value["run"].tolist() == [inside]


def test_stop_shows_stopping_then_the_final_state(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="running", steps=2)
    at = app("runs", run=run_id)
    at.button(key=f"runs.{run_id}.stop").click().run()
    assert not at.exception
    assert store.get_run(run_id).status == "stopping"
    assert any(m.value == ":orange[:material/pending: stopping]" for m in at.metric)
    assert not [b for b in at.button if b.key == f"runs.{run_id}.stop"]  # no second stop
    # the worker settles the run; the next refresh shows the truthful end state
    store.transition(run_id, "stopped")
    at.run()
    assert any(m.value == ":gray[:material/stop_circle: stopped]" for m in at.metric)


def test_cancel_queued_and_delete_with_confirmation(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="queued")
    at = app("runs", run=run_id)
    at.button(key=f"runs.{run_id}.cancel").click().run()
    assert store.get_run(run_id).status == "cancelled"
    at.button(key=f"runs.{run_id}.delete").click().run()
    assert not at.exception
    assert store.list_runs() == []


def test_launch_queues_a_run_through_the_job_client(app, store: Store, experiment: int) -> None:
    at = app("runs")
    at.button(key="runs_launch").click().run()
    assert not at.exception
    [run] = store.list_runs()
    assert run.status == "queued" and run.experiment_id == experiment and run.celery_task_id
    assert at.dataframe[0].value["run"].tolist() == [run.id]


def test_tags_and_notes_are_saved(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=1)
    at = app("runs", run=run_id)
    at.text_input(key=f"runs.{run_id}.tags").set_value("baseline, lr-sweep")
    at.text_area(key=f"runs.{run_id}.notes").set_value("the **good** one")
    at.button[[b.label for b in at.button].index("Save tags and notes")].click().run()
    run = store.get_run(run_id)
    assert run.tags == ("baseline", "lr-sweep") and run.notes == "the **good** one"


def test_status_filter(app, store: Store, experiment: int, seed) -> None:
    seed(experiment, status="failed", steps=1)
    ok = seed(experiment, status="succeeded", steps=1)
    at = app("runs")
    at.multiselect(key="runs_filter_status").set_value(["succeeded"]).run()
    assert at.dataframe[0].value["run"].tolist() == [ok]


def test_resume_creates_a_new_attempt_or_explains_why_not(app, store: Store, experiment: int, seed,
                                                           tmp_path) -> None:
    run_id = seed(experiment, status="stopped", steps=2)
    at = app("runs", run=run_id)
    at.button(key=f"runs.{run_id}.resume").click().run()
    assert not at.exception
    assert any("has no checkpoint to resume from" in e.value for e in at.error)
    store.add_checkpoint(run_id, 2, str(tmp_path / "ckpt-2"))
    at.button(key=f"runs.{run_id}.resume").click().run()
    new = store.list_runs(limit=1)[0]
    assert new.id != run_id and new.resumed_from == run_id and new.attempt == 2 and new.status == "queued"
    assert at.selectbox(key="runs_pick").value == new.id  # the page follows the new attempt


def test_launch_of_an_invalid_stored_config_is_refused_with_the_reason(app, store: Store) -> None:
    bad = store.create_experiment("broken", config={"agents": [], "trainer": {"num_generations": 1}})
    at = app("runs")
    at.selectbox(key="runs_launch_exp").set_value(bad.id)
    at.button(key="runs_launch").click().run()
    assert not at.exception
    [message] = [e.value for e in at.error]
    assert message.startswith("Could not queue the run:") and "agents" in message and "num_generations" in message
    assert store.list_runs() == []  # nothing was stored
