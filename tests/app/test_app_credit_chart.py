"""The run page's "Who contributed" chart: per agent, its credit over the steps and a bar of its mean
credit over the run's last fifth of steps, drawn from ``agent/<name>/credit`` metrics stored in the
test's SQLite file; a run without credit gets a note saying how to turn it on (``credit_samples``)."""

from __future__ import annotations

import math

import pytest

from db.records import MetricPoint, Series
from db.store import Store


def _series(xs: list[float], ys: list[float]) -> Series:
    return Series(run_id=1, key="agent/a/credit", x="step", xs=tuple(xs), ys=tuple(ys), total_points=len(xs),
                  downsampled=False)


def test_credit_curves_by_hand() -> None:
    from app.components.credit_chart import credit_curves

    keys = ["agent/b/credit", "agent/a/loss", "agent/a/credit", "train/reward_mean", "perf/credit_reward_calls",
            "agent//credit", "trainer/t1/agent/coder/credit", "trainer/t1/credit"]
    assert credit_curves(keys) == (("a", "agent/a/credit"), ("b", "agent/b/credit"),
                                   ("t1 · coder", "trainer/t1/agent/coder/credit"))
    assert credit_curves(["agent/a/loss", "train/reward_mean"]) == ()


def test_last_fifth_mean_by_hand() -> None:
    from app.components.credit_chart import last_fifth_start, mean_from, step_span

    assert last_fifth_start(1, 10) == pytest.approx(8.2)  # steps 9 and 10: two of ten
    assert last_fifth_start(5, 5) == 5  # one step: that step
    series = _series([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [0, 0, 0, 0, 0, 0, 0, 0, 0.5, 1.0])
    assert mean_from(series, 8.2) == pytest.approx(0.75)  # (0.5 + 1.0) / 2
    assert mean_from(_series([9, 10], [math.nan, 0.25]), 8.2) == 0.25  # a non-finite value is left out
    assert mean_from(_series([1, 2], [1.0, 1.0]), 8.2) is None
    assert step_span([_series([3, 7], [0, 0]), _series([1, 4], [0, 0])]) == (1, 7)
    assert step_span([]) is None


def test_no_credit_note_names_the_setting(make_config) -> None:
    from app.components.credit_chart import no_credit_note

    off = no_credit_note(make_config())  # the default: probes off (they call the reward again)
    assert "credit probes are off" in off and "`credit_samples: 0`" in off and "above 0" in off
    assert no_credit_note(make_config(credit_samples=0)) == off
    assert "logged no credit (yet)" in no_credit_note(make_config(credit_samples=8))
    one = make_config()
    one["agents"] = one["agents"][:1]
    assert "no partner to credit" in no_credit_note(one)
    assert "iac does not measure" in no_credit_note(make_config(algorithm="iac"))
    assert no_credit_note(make_config(algorithm="iac")).endswith("magrpo, grpo, mareinforce, maremax, marloo, "
                                                                  "centralized_magrpo, marlhf, marlhf_iter do.")


def _run_with_credit(store: Store, experiment: int, steps: int, credits: dict[str, callable]) -> int:
    config = dict(store.get_experiment(experiment).config)
    run_id = store.create_run(experiment, config, "cpu", total_steps=steps, device="cpu").id
    store.transition(run_id, "starting")
    store.transition(run_id, "running")
    points = [MetricPoint(key=f"agent/{name}/credit", step=step, env_step=step * 4, value=credit(step),
                          wall_time=1.7e9 + step)
              for name, credit in credits.items() for step in range(1, steps + 1)]
    points += [MetricPoint(key="train/reward_mean", step=step, env_step=step * 4, value=0.5, wall_time=1.7e9 + step)
               for step in range(1, steps + 1)]
    store.import_metrics(run_id, points)
    return run_id


def _credit_figures(figures: list[dict]) -> tuple[dict | None, dict | None]:
    def find(prefix: str) -> dict | None:
        found = [f for f in figures if f["layout"]["title"]["text"].startswith(prefix)]
        return found[0] if found else None

    return find("credit per agent"), find("mean credit, last fifth")


def test_the_chart_draws_each_agents_credit_and_last_fifth_mean(app, store: Store, experiment: int,
                                                                 figures) -> None:
    run_id = _run_with_credit(store, experiment, 10, {"a": lambda s: 0.1 * s, "b": lambda s: -0.05 * s})
    at = app("run_detail", run=run_id)
    assert not at.exception
    lines, bars = _credit_figures(figures(at))
    assert lines is not None and bars is not None
    raw = {t["name"]: t for t in lines["data"] if t["name"].endswith("(raw)")}
    assert sorted(raw) == ["a (raw)", "b (raw)"]
    assert raw["a (raw)"]["x"] == list(range(1, 11))
    assert raw["b (raw)"]["y"] == pytest.approx([-0.05 * s for s in range(1, 11)])
    assert bars["layout"]["title"]["text"] == "mean credit, last fifth (steps 9–10)"
    assert {t["name"]: t["y"][0] for t in bars["data"]} == pytest.approx({"a": 0.95, "b": -0.475})  # steps 9, 10
    assert [t["text"][0] for t in bars["data"]] == ["+0.950", "-0.475"]
    assert any("left empty" in c.value for c in at.caption)  # the caption explains credit
    assert not any("credit_samples" in c.value for c in at.caption)  # no note beside the chart
    assert not [i for i in at.info if "same credit" in i.value]  # credit that differs needs no explanation


def test_a_long_run_takes_the_last_fifth_from_every_step(app, store: Store, experiment: int, figures) -> None:
    run_id = _run_with_credit(store, experiment, 600, {"a": lambda s: s / 1000, "b": lambda s: 0.0})
    at = app("run_detail", run=run_id)
    at.select_slider(key="detail_pts").set_value(250).run()  # the lines are downsampled to 250 points
    assert not at.exception
    lines, bars = _credit_figures(figures(at))
    assert len(lines["data"][0]["x"]) < 600
    assert bars["layout"]["title"]["text"] == "mean credit, last fifth (steps 481–600)"  # 600 − 599/5 = 480.2
    assert {t["name"]: t["y"][0] for t in bars["data"]} == pytest.approx({"a": 0.5405, "b": 0.0})  # mean of 481..600


def test_without_credit_the_chart_is_absent_and_a_note_says_how(app, store: Store, experiment: int, seed,
                                                                figures) -> None:
    run_id = seed(experiment, status="succeeded", steps=5)
    at = app("run_detail", run=run_id)
    assert not at.exception
    assert _credit_figures(figures(at)) == (None, None)
    assert figures(at)  # the other charts are drawn
    [note] = [c.value for c in at.caption if "Who contributed" in c.value]
    assert "credit probes are off" in note and "credit_samples" in note and "above 0" in note


def test_identical_credit_is_explained_with_the_team_analysis(app, store: Store, experiment: int) -> None:
    from app.components.credit_chart import SATURATED, identical_credit

    same = Series(run_id=1, key="k", x="step", xs=(1.0, 2.0), ys=(0.5, 0.7), total_points=2, downsampled=False)
    other = Series(run_id=1, key="k", x="step", xs=(1.0, 2.0), ys=(0.5, 0.6), total_points=2, downsampled=False)
    assert identical_credit([same, same]) and not identical_credit([same, other]) and not identical_credit([same])
    run_id = _run_with_credit(store, experiment, 4, {"a": lambda s: 0.2 * s, "b": lambda s: 0.2 * s})
    at = app("run_detail", run=run_id)
    assert [i.value for i in at.info if "same credit" in i.value] == [SATURATED]
