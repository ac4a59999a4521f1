"""The live-dashboard benchmark's arithmetic: training speed from a run's wall times, a long finished run
tiled from a short one, and the report beside a baseline with the budget of issue 45."""

from __future__ import annotations

import pytest

from bench.dashboard_live import report, steps_per_s, tiled_run
from db.store import Store


def test_speed_and_tiled_run(store: Store) -> None:
    experiment = store.create_experiment("live", config={"name": "live"}).id
    run = store.create_run(experiment, {"name": "live"}, "cpu", total_steps=20)
    store.transition(run.id, "starting")
    store.transition(run.id, "running")
    for step in range(1, 21):
        store.log_step(run.id, step, step, {"train/reward_mean": step / 20, "perf/step_time_s": 0.25},
                       wall_time=1000.0 + step * 0.25)
    store.transition(run.id, "succeeded")
    assert steps_per_s(store, run.id, skip=5) == pytest.approx(4.0)
    long = tiled_run(store, run.id, 50)
    assert store.get_run(long).status == "succeeded" and store.get_run(long).step == 50
    assert store.series(long, "train/reward_mean", max_points=1000).ys[20] == pytest.approx(1 / 20)


def test_report_sets_numbers_beside_the_baseline_and_checks_the_budget() -> None:
    text = report({"usable_s": 1.5, "finished_server_share": 0.05, "open_vs_closed": 0.95},
                  {"usable_s": 3.0, "finished_server_share": 0.25})
    assert "baseline" in text.splitlines()[0]
    assert any(line.startswith("usable_s") and "0.50x" in line for line in text.splitlines())
    assert "budget usable_s <= 3.0: met" in text
    assert "budget finished_server_share <= 0.02: MISSED" in text
    assert "budget open_vs_closed >= 0.9: met" in text
