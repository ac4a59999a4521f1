"""Compare page (overlaid curves, diff of only what differs) and Workers page (workers, queues, host)."""

from __future__ import annotations

import pytest

from db.store import Store


def test_compare_overlays_runs_and_diffs_configs(app, store: Store, experiment: int, seed, figures,
                                                 make_config) -> None:
    a = seed(experiment, status="succeeded", steps=3)
    b = seed(experiment, status="succeeded", steps=4, config=make_config(agent_learning_rate=1e-4),
             reward=lambda step: 1.0)
    at = app("compare", run=a)
    assert not at.exception
    [figure] = figures(at)
    smoothed = [t for t in figure["data"] if "raw" not in t["name"]]
    assert [t["name"] for t in smoothed] == [f"#{a}", f"#{b}"]
    assert smoothed[1]["x"] == [1, 2, 3, 4] and smoothed[1]["y"] == pytest.approx([1.0] * 4)
    diff = at.dataframe[0].value
    assert diff["field"].tolist() == ["trainer.agent_learning_rate"]
    assert diff[f"#{a}"].tolist() == ["5e-06"] and diff[f"#{b}"].tolist() == ["0.0001"]


def test_compare_needs_two_runs(app, store: Store, experiment: int, seed) -> None:
    seed(experiment, status="succeeded", steps=1)
    at = app("compare")
    assert any("at least two runs" in i.value for i in at.info)


def test_workers_and_queues(app, store: Store, experiment: int, seed) -> None:
    store.upsert_worker("cpu@box", host="box", devices=["cpu"], queues=["cpu"], pid=42)
    queued = seed(experiment, status="queued")
    at = app("workers")
    assert not at.exception
    table = at.dataframe[0].value
    assert table["worker"].tolist() == ["cpu@box"] and table["online"].tolist() == ["🟢 online"]
    assert any(m.value.startswith("**cpu** · 1 waiting · served by cpu@box") for m in at.markdown)
    assert any(f"#{queued} demo" in m.value for m in at.markdown)
    assert [m.label for m in at.metric][:2] == ["CPU", "RAM"]


def test_workers_empty_state(app) -> None:
    at = app("workers")
    assert any("`cooplab up` starts the dashboard with one CPU worker" in i.value for i in at.info)
