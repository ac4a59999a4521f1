"""What watching a run costs: an ended run's page asks the browser for no timed reruns, and a live
page's charts read only the points logged since the last poll (issue 45, "Cost of looking")."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import local_script_runner

from app.live import LiveMetrics, downsample
from db.store import Store


@pytest.fixture
def reruns(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The intervals of the timed fragment reruns the page asked the browser for (``run_every``)."""
    asked: list[float] = []
    parse = local_script_runner.parse_tree_from_messages

    def spy(messages):
        asked.extend(m.auto_rerun.interval for m in messages if m.HasField("auto_rerun"))
        return parse(messages)

    monkeypatch.setattr(local_script_runner, "parse_tree_from_messages", spy)
    return asked


def test_an_ended_run_is_not_polled_a_live_one_is(app, store: Store, experiment: int, seed, reruns) -> None:
    ended = seed(experiment, status="succeeded", steps=4)
    at = app("run_detail", run=ended)
    assert not at.exception and at.get("plotly_chart")
    assert reruns == []  # nothing on the page reruns by itself: it costs nothing while it is open
    live = seed(experiment, status="running", steps=4)
    at = app("run_detail", run=live)
    assert not at.exception
    assert len(reruns) >= 3 and set(reruns) == {2.0}  # status, charts and log follow the run


def test_a_live_page_reads_only_new_points(app, store: Store, experiment: int, seed, figures) -> None:
    run_id = seed(experiment, status="running", steps=5)
    at = app("run_detail", run=run_id)
    held = at.session_state[f"live_metrics.{run_id}"]
    assert isinstance(held, LiveMetrics) and held.rows == 5 * len(held.points)
    keys = len(held.points)
    for step in (6, 7, 8):
        store.log_step(run_id, step, step * 4, {"train/reward_mean": 0.1 * step, "turn_1/reward_mean": 0.1 * step,
                                                "turn_1/expected_return": 0.2 * step,
                                                "agent/writer/loss": 1 / step, "agent/editor/loss": 1 / step},
                       wall_time=1.7e9 + step)
    before = held.rows
    at.run()
    assert held.rows - before == 3 * keys  # the three new steps of the charted keys, nothing else
    reward = next(f for f in figures(at) if f["layout"]["title"]["text"].startswith("reward_mean per turn"))
    assert reward["data"][0]["x"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert reward["data"][0]["y"] == pytest.approx([0.1 * s for s in range(1, 9)])
    queries, rows = held.queries, held.rows
    at.run()
    assert held.rows == rows and held.queries == queries + 1  # nothing new: one query, no rows
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"][-1] == 8


def test_held_points_downsample_like_the_store(store: Store, experiment: int, seed) -> None:
    run_id = seed(experiment, status="running", steps=60, reward=lambda s: 50.0 if s == 31 else 0.01 * s)
    held = LiveMetrics(run_id)
    held.refresh(store, ["train/reward_mean"])
    mine = held.series("train/reward_mean", max_points=12)
    theirs = store.series(run_id, "train/reward_mean", max_points=12)
    assert mine.downsampled and mine.total_points == theirs.total_points == 60
    assert len(mine) <= 12 and 50.0 in mine.ys  # the spike survives
    assert (mine.xs[0], mine.xs[-1]) == (theirs.xs[0], theirs.xs[-1]) == (1.0, 60.0)
    assert downsample([0.0, 1.0, 2.0], [1.0, float("nan"), 3.0], 1) == [0, 2]
