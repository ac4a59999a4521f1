"""The runs table as an analysis hub: picked config and metric columns (kept per experiment, in the
store: a new session finds them), sort over every run, search, group-by with aggregates, ticked rows overlaid in Compare, and renaming a run."""

from __future__ import annotations

import math

import pytest

from db.store import Store


def _lr_runs(store: Store, experiment: int, seed, make_config, rates: list[float]) -> list[int]:
    """One succeeded two-step run per learning rate; run i's team reward is (i + 1) / 10 at its last step."""
    ids = []
    for index, rate in enumerate(rates):
        config = make_config(agent_learning_rate=rate)
        ids.append(seed(experiment, status="succeeded", steps=2, config=config,
                        reward=lambda step, i=index: (i + 1) / 10 * step / 2))
    return ids


def test_picked_config_and_metric_columns_are_kept_per_experiment_for_new_sessions(app, store: Store,
                                                                                   experiment: int, seed,
                                                                                   make_config) -> None:
    first, second = _lr_runs(store, experiment, seed, make_config, [0.01, 0.001])
    other = store.create_experiment("other", config=make_config("other")).id
    at = app("runs")
    path = "trainer.agent_learning_rate"
    assert f"{path}  · differs" in at.multiselect(key="runs_cols_config.all").options  # differs between runs
    assert "agents.0.model" in at.multiselect(key="runs_cols_config.all").options
    at.selectbox(key="runs_filter_exp").set_value(experiment).run()
    at.multiselect(key=f"runs_cols_config.{experiment}").set_value([path]).run()
    at.multiselect(key=f"runs_cols_metrics.{experiment}").set_value(["agent/writer/loss"]).run()
    at.multiselect(key=f"runs_cols_aggs.{experiment}").set_value(["last", "max"]).run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table.columns)[-3:] == [path, "agent/writer/loss (last)", "agent/writer/loss (max)"]
    by_run = table.set_index("run")
    assert by_run.loc[first, path] == "0.01" and by_run.loc[second, path] == "0.001"
    assert by_run.loc[first, "agent/writer/loss (last)"] == pytest.approx(1 / 3)  # step 2: 1 / (2 + 1)
    assert by_run.loc[first, "agent/writer/loss (max)"] == pytest.approx(1 / 2)  # step 1
    at.selectbox(key="runs_filter_exp").set_value(other).run()  # another experiment: the default columns
    assert path not in list(at.dataframe[0].value.columns) if at.dataframe else True
    at.selectbox(key="runs_filter_exp").set_value(experiment).run()  # back: its columns come back
    assert list(at.dataframe[0].value.columns)[-3:] == [path, "agent/writer/loss (last)", "agent/writer/loss (max)"]
    assert store.saved_view("owner", "runs_columns", "all") is None  # showing the defaults saved nothing
    assert store.saved_view("owner", "runs_columns", str(experiment)) == {
        "run": ["name", "status", "step", "team reward", "trend", "duration", "tags", "notes"],
        "config": [path], "metrics": ["agent/writer/loss"], "aggregates": ["last", "max"]}
    # another browser saves later, naming a setting and a metric no run has (any more) and a column this
    # version does not know; this session's reruns change nothing, so they write nothing over it
    store.save_view("owner", "runs_columns", str(experiment), {
        "run": ["status", "no such column"], "config": [path, "gone.lr"],
        "metrics": ["gone/metric", "agent/writer/loss"], "aggregates": ["max"]})
    at.run()
    assert store.saved_view("owner", "runs_columns", str(experiment))["config"] == [path, "gone.lr"]
    again = app("runs")  # a new session (a reload, another browser): the saved columns, stale ones dropped
    again.selectbox(key="runs_filter_exp").set_value(experiment).run()
    assert not again.exception
    assert list(again.dataframe[0].value.columns) == ["run", "status", path, "agent/writer/loss (max)"]
    again.button(key=f"runs_cols_reset.{experiment}").click().run()
    assert store.saved_view("owner", "runs_columns", str(experiment)) is None
    assert list(again.dataframe[0].value.columns)[-1] == "notes"  # the default columns


def test_sort_orders_every_run_not_only_the_page(app, store: Store, experiment: int, seed) -> None:
    ids = [seed(experiment, status="succeeded", steps=1, reward=lambda step, i=i: 1.0 - i / 100) for i in range(27)]
    at = app("runs")
    assert ids[0] not in at.dataframe[0].value["run"].tolist()  # newest first: the oldest is on page 2
    at.selectbox(key="runs_sort").set_value("team reward").run()
    shown = at.dataframe[0].value["run"].tolist()
    assert shown[0] == ids[0] and len(shown) == 25  # the best team reward of all 27 runs, though the oldest
    at.toggle(key="runs_desc").set_value(False).run()
    assert at.dataframe[0].value["run"].tolist()[0] == ids[-1]
    assert any("27 runs, sorted by team reward over all of them; page 1 of 2" in c.value for c in at.caption)


def test_search_matches_names_tags_and_config_values(app, store: Store, experiment: int, seed, make_config) -> None:
    slow, fast = _lr_runs(store, experiment, seed, make_config, [0.0001, 0.05])
    store.set_run_notes(slow, tags=["careful"])
    store.rename_run(fast, "Aggressive LR")
    at = app("runs")
    for query, expected in (("agent_learning_rate=0.05", [fast]), ("careful", [slow]), ("aggressive", [fast]),
                            (f"#{slow}", [slow]), ("demo succeeded", [fast, slow]), ("nothing-like-this", [])):
        at.text_input(key="runs_search").set_value(query).run()
        assert not at.exception
        shown = at.dataframe[0].value["run"].tolist() if at.dataframe else []
        assert shown == expected, query
    at.text_input(key="runs_search").set_value("careful").run()
    assert "succeeded: 1" in [c.value for c in at.caption]  # the counts follow the search too


def test_group_by_a_config_column_aggregates_the_numeric_columns(app, store: Store, experiment: int, seed,
                                                                 make_config) -> None:
    _lr_runs(store, experiment, seed, make_config, [0.01, 0.01, 0.001])  # team rewards 0.1, 0.2, 0.3
    at = app("runs")
    path = "trainer.agent_learning_rate"
    at.multiselect(key="runs_cols_config.all").set_value([path]).run()
    at.selectbox(key="runs_group").set_value(path).run()
    assert not at.exception
    groups = at.dataframe[1].value.set_index(path)  # under the runs table
    assert groups.loc["0.001", "runs"] == 1 and groups.loc["0.01", "runs"] == 2
    assert groups.loc["0.01", "team reward mean"] == pytest.approx(0.15)
    assert groups.loc["0.01", "team reward std"] == pytest.approx(math.sqrt(0.005))  # sample std of 0.1, 0.2
    assert math.isnan(groups.loc["0.001", "team reward std"])  # one run: no spread
    assert groups.loc["0.01", "step mean"] == 2


def test_ticked_rows_open_compare_with_those_runs(app, store: Store, experiment: int, seed) -> None:
    a, b, c = (seed(experiment, status="succeeded", steps=2) for _ in range(3))
    at = app("runs")
    compare = at.button(key="runs_compare")
    assert compare.disabled and compare.label == "Compare selected (0)"
    table = at.dataframe[0]
    rows = table.value["run"].tolist()
    at.session_state[table.key] = {"selection": {"rows": [rows.index(a), rows.index(c)], "columns": [], "cells": []}}
    at.run()
    assert at.title[0].value == "Runs"  # ticking rows opens nothing
    assert any(cap.value == f"Selected for Compare: #{c}, #{a}" for cap in at.caption)
    at.button(key="runs_compare").click().run()
    assert not at.exception
    assert at.title[0].value == "Compare runs"
    assert sorted(at.multiselect(key="cmp_runs").value) == [a, c] and b not in at.multiselect(key="cmp_runs").value


def test_rename_shows_the_name_in_the_table_pickers_and_compare(app, store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="succeeded", steps=1)
    other = seed(experiment, status="succeeded", steps=1)
    at = app("runs", run=run_id)
    at.text_input(key=f"runs.{run_id}.name").set_value("  lr 1e-3 baseline ")
    at.button[[b.label for b in at.button].index("Rename")].click().run()
    assert not at.exception
    assert store.get_run(run_id).name == "lr 1e-3 baseline"
    table = at.dataframe[0].value.set_index("run")
    assert table.loc[run_id, "name"] == "lr 1e-3 baseline" and table.loc[other, "name"] == "demo"
    at = app("compare", runs=f"{run_id},{other}")
    labels = [at.multiselect(key="cmp_runs").format_func(i) for i in (run_id, other)]
    assert labels[0].startswith(f"#{run_id} lr 1e-3 baseline (demo)") and labels[1].startswith(f"#{other} demo")


def test_removing_the_sorted_or_grouped_column_falls_back(app, store: Store, experiment: int, seed,
                                                          make_config) -> None:
    _lr_runs(store, experiment, seed, make_config, [0.01, 0.001])
    at = app("runs")
    path = "trainer.agent_learning_rate"
    at.multiselect(key="runs_cols_config.all").set_value([path]).run()
    at.selectbox(key="runs_sort").set_value(path).run()
    at.selectbox(key="runs_group").set_value(path).run()
    at.multiselect(key="runs_cols_config.all").set_value([]).run()
    assert not at.exception
    assert at.selectbox(key="runs_sort").value == "run" and at.selectbox(key="runs_group").value is None
    assert len(at.dataframe) == 1  # no groups table left behind
