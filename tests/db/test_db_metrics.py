"""Metric writes and reads: log_step's single transaction, keys, latest values, NaN, exports."""

from __future__ import annotations

import json
import math

import pytest

from db.store import NotFoundError, Store
from engine.transcripts import Episode, TurnRecord


def _episode(split: str = "train") -> Episode:
    return Episode(sample_index=0, split=split, item_index=1,
                   turns=(TurnRecord(1, 0, "coder", "write f", "def f(): pass", 1.0, 1.0, 0.5),))


def test_log_step_writes_metrics_episodes_progress_and_heartbeat(store: Store, run_id: int) -> None:
    stop = store.log_step(run_id, 3, 48, {"train/reward_mean": 0.25, "perf/step_time_s": 1.5}, [_episode()],
                          wall_time=100.0)
    assert stop is False
    run = store.get_run(run_id)
    assert (run.step, run.env_step, run.progress) == (3, 48, 0.3)
    assert run.heartbeat_at is not None
    assert store.metric_keys(run_id) == ["perf/step_time_s", "train/reward_mean"]
    latest = store.latest_metrics(run_id, ["train/reward_mean"])
    assert (latest["train/reward_mean"].value, latest["train/reward_mean"].env_step) == (0.25, 48)
    assert len(store.episodes(run_id)) == 1
    store.request_stop(run_id)
    assert store.log_step(run_id, 4, 64, {"train/reward_mean": 0.5}) is True


def test_log_step_is_one_transaction(store: Store, run_id: int) -> None:
    store.log_step(run_id, 1, 16, {"m": 1.0})
    with pytest.raises(ValueError, match="split must be one of"):
        store.log_step(run_id, 2, 32, {"m": 2.0}, [_episode(), _episode(split="test")])
    # Nothing of step 2 is stored: not the metric, not the first episode, not the progress.
    assert store.series(run_id, "m").ys == (1.0,)
    assert store.episodes(run_id) == []
    assert store.get_run(run_id).step == 1


def test_bad_metrics_are_refused_with_the_key_named(store: Store, run_id: int) -> None:
    with pytest.raises(ValueError, match="metric 'loss' has value 'high', which is not a number"):
        store.log_step(run_id, 1, 1, {"loss": "high"})
    with pytest.raises(ValueError, match="metric key '' must be a non-empty string"):
        store.log_metrics(run_id, 1, 1, {"": 1.0})
    with pytest.raises(NotFoundError, match="no run with id 555"):
        store.log_step(555, 1, 1, {"m": 1.0})


def test_latest_metrics_takes_the_highest_step_of_each_key(store: Store, run_id: int) -> None:
    store.log_step(run_id, 1, 10, {"a": 1.0, "b": 10.0})
    store.log_step(run_id, 2, 20, {"a": 2.0})
    store.log_metrics(run_id, 2, None, {"eval/pass_at_1": 0.5})
    latest = store.latest_metrics(run_id)
    assert {k: (p.step, p.value) for k, p in latest.items()} == {"a": (2, 2.0), "b": (1, 10.0),
                                                                 "eval/pass_at_1": (2, 0.5)}
    assert latest["eval/pass_at_1"].env_step is None
    assert store.latest_metrics(run_id, ["a", "nope"]).keys() == {"a"}


def test_nan_is_kept_as_nan_but_never_plotted(store: Store, run_id: int) -> None:
    store.log_step(run_id, 1, 1, {"loss": 0.5})
    store.log_step(run_id, 2, 2, {"loss": float("nan")})
    assert math.isnan(store.latest_metrics(run_id, ["loss"])["loss"].value)
    assert store.series(run_id, "loss").xs == (1,)
    points = list(store.iter_metrics(run_id))
    assert points[0].value == 0.5 and math.isnan(points[1].value)


def test_exports(store: Store, run_id: int) -> None:
    store.log_step(run_id, 1, 8, {"b": 0.5, "a": 1.25}, wall_time=10.0)
    store.log_metrics(run_id, 1, None, {"c": 2.0}, wall_time=11.0)
    csv_text = "".join(store.stream_metrics_csv(run_id))
    assert csv_text.splitlines() == ["key,step,env_step,value,wall_time", "a,1,8,1.25,10.0", "b,1,8,0.5,10.0",
                                     "c,1,,2.0,11.0"]
    rows = [json.loads(line) for line in "".join(store.stream_metrics_jsonl(run_id, keys=["c"])).splitlines()]
    assert rows == [{"key": "c", "step": 1, "env_step": None, "value": 2.0, "wall_time": 11.0}]


def test_runs_do_not_see_each_others_metrics(store: Store, experiment_id: int) -> None:
    a = store.create_run(experiment_id, {}, "cpu").id
    b = store.create_run(experiment_id, {}, "cpu").id
    store.log_step(a, 1, 1, {"m": 1.0})
    store.log_step(b, 1, 1, {"n": 2.0})
    assert store.metric_keys(a) == ["m"] and store.metric_keys(b) == ["n"]
    assert store.series(b, "m").total_points == 0
