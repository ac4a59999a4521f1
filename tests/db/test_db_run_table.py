"""The runs table's reads: every run the filters match with the summary of the chosen metrics (last,
smallest, largest, count) in a fixed number of queries, and runs' display names."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import event

from db.engine import write_session
from db.ops_run_table import MetricSummary
from db.records import MetricPoint
from db.store import Store


def _running(store: Store, experiment_id: int, **kw) -> int:
    run = store.create_run(experiment_id, {"trainer": {"learning_rate": 0.1}}, "cpu", **kw)
    store.transition(run.id, "starting")
    store.transition(run.id, "running")
    return run.id


def test_summary_holds_last_lowest_highest_and_count(store: Store, experiment_id: int) -> None:
    run_id = _running(store, experiment_id)
    for step, value in ((1, 0.5), (2, 0.1), (3, 0.9), (4, math.nan)):  # the last step NaN: the last value is 0.9
        store.log_step(run_id, step, step, {"reward/mean": value, "loss": 10.0 - step})
    other = _running(store, experiment_id)
    [first, second] = store.table_runs(metric_keys=["reward/mean", "loss", "never/logged"])
    assert (first.run.id, second.run.id) == (other, run_id)  # newest first
    assert first.metrics == {}
    assert second.metrics == {"reward/mean": MetricSummary(last=0.9, lowest=0.1, highest=0.9, count=3),
                              "loss": MetricSummary(last=6.0, lowest=6.0, highest=9.0, count=4)}
    assert store.table_metric_keys() == ["loss", "reward/mean"]


def test_filters_match_list_runs(store: Store, experiment_id: int) -> None:
    tagged = _running(store, experiment_id, tags=["sweep"])
    store.transition(_running(store, experiment_id), "succeeded")
    other = store.create_experiment("other", config={}).id
    _running(store, other)
    assert [t.run.id for t in store.table_runs(tag="sweep")] == [tagged]
    assert {t.run.status for t in store.table_runs(experiment_id, ["succeeded"])} == {"succeeded"}
    assert len(store.table_runs(experiment_id)) == 2 and len(store.table_runs(limit=1)) == 1
    store.log_step(tagged, 1, 1, {"a": 1.0})
    assert store.table_metric_keys(other) == [] and store.table_metric_keys(tag="sweep") == ["a"]


def test_rename_sets_and_clears_a_display_name(store: Store, experiment_id: int) -> None:
    run_id = _running(store, experiment_id)
    assert store.get_run(run_id).name is None
    assert store.rename_run(run_id, "  lr 1e-3, long warmup ").name == "lr 1e-3, long warmup"
    assert store.table_runs()[0].run.name == "lr 1e-3, long warmup"
    assert store.rename_run(run_id, "  ").name is None
    with pytest.raises(ValueError, match="within 200"):
        store.rename_run(run_id, "x" * 201)
    with pytest.raises(ValueError, match="one line"):
        store.rename_run(run_id, "a\nb")


@contextmanager
def _counted(store: Store) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ARG001
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            statements.append(statement)

    event.listen(store.engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        event.remove(store.engine, "before_cursor_execute", count)


def test_two_queries_for_two_hundred_runs_on_a_sqlite_file(sqlite_store: Store) -> None:
    store = sqlite_store
    experiment_id = store.create_experiment("many", config={}).id
    keys = ["train/reward_mean", "agent/a/loss", "perf/step_time_s"]
    with write_session(store.engine) as session:  # 200 runs of 10 steps, written in one transaction
        view = store.within(session)
        for index in range(200):
            run = view.create_run(experiment_id, {"seed": index}, "cpu")
            view.import_metrics(run.id, [MetricPoint(key=k, step=step, env_step=step, value=index + step / 100,
                                                     wall_time=1.7e9 + step) for k in keys for step in range(1, 11)])
    with _counted(store) as few:
        small = store.table_runs(metric_keys=keys, limit=10)
    with _counted(store) as many:
        table = store.table_runs(metric_keys=keys)
    assert len(small) == 10 and len(table) == 200
    assert len(many) == len(few) == 2  # the runs, then the summary of every run: no query per run
    by_seed = {t.run.config["seed"]: t for t in table}
    assert by_seed[7].metrics["agent/a/loss"] == MetricSummary(last=7.1, lowest=7.01, highest=7.1, count=10)
    assert all(set(t.metrics) == set(keys) for t in table)
