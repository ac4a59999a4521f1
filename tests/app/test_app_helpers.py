"""Pure helpers of the dashboard: smoothing, config diff, metric grouping, run actions, log tail."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from app.configdiff import diff_configs, flatten
from app.metricgroups import default_charts, group_metrics
from app.queries import read_log
from app.runinfo import actions_for, format_duration
from app.smoothing import ema, rolling_mean, smooth


def test_ema_is_debiased_like_tensorboard() -> None:
    # weight 0.5: running 0.5 → /0.5 = 1; running 0.25+1.5=1.75 → /0.75; running 0.875+2.5=3.375 → /0.875
    assert ema([1.0, 3.0, 5.0], 0.5) == pytest.approx([1.0, 1.75 / 0.75, 3.375 / 0.875])
    assert ema([2.0, 4.0], 0.0) == [2.0, 4.0]


def test_ema_passes_non_finite_values_through() -> None:
    out = ema([1.0, math.nan, 3.0], 0.5)
    assert out[0] == 1.0 and math.isnan(out[1])
    assert out[2] == pytest.approx(1.75 / 0.75)  # as if the NaN was not there


def test_rolling_mean_and_dispatch() -> None:
    assert rolling_mean([1, 2, 3, 4], 2) == [1.0, 1.5, 2.5, 3.5]
    assert smooth([1.0, 2.0], "none", 0.9) == [1.0, 2.0]
    assert smooth([1.0, 3.0], "window", 2) == [1.0, 2.0]
    with pytest.raises(ValueError, match="unknown smoothing method 'median'"):
        smooth([1.0], "median", 1)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        ema([1.0], 1.0)


def test_config_diff_keeps_only_differences() -> None:
    a = {"trainer": {"lr": 1e-4, "seed": 0}, "agents": [{"name": "a"}, {"name": "b"}]}
    b = {"trainer": {"lr": 3e-4, "seed": 0}, "agents": [{"name": "a"}]}
    assert flatten(a) == {"trainer.lr": 1e-4, "trainer.seed": 0, "agents.0.name": "a", "agents.1.name": "b"}
    rows = diff_configs({"#1": a, "#2": b})
    assert rows == [
        {"field": "agents.1.name", "#1": "b", "#2": "—"},
        {"field": "trainer.lr", "#1": "0.0001", "#2": "0.0003"},
    ]
    assert diff_configs({"#1": a}) == []
    assert diff_configs({"#1": a, "#2": a}) == []
    # an empty section is the same as no section: never "—" against "{}"
    assert diff_configs({"#1": {**a, "system": {}}, "#2": a}) == []
    assert diff_configs({"#1": {"trainer": {"actor_critic": {}}}, "#2": {"trainer": {}}}) == []


def test_metric_grouping() -> None:
    keys = ["train/reward_mean", "turn_1/reward_mean", "turn_2/reward_mean", "turn_1/expected_return",
            "agent/writer/loss", "agent/editor/loss", "perf/step_time_s", "eval/pass@1", "reward/syntax"]
    charts = group_metrics(keys)
    by_title = {c.title: c for c in charts}
    assert by_title["reward_mean per turn"].curves == (
        ("all turns", "train/reward_mean"), ("turn 1", "turn_1/reward_mean"), ("turn 2", "turn_2/reward_mean"))
    assert by_title["loss per agent"].curves == (("editor", "agent/editor/loss"), ("writer", "agent/writer/loss"))
    assert "train/reward_mean" not in by_title  # drawn inside the per-turn chart
    # a single-turn run: "turn 1" would repeat "all turns" exactly, so it is drawn once
    single = {c.title: c for c in group_metrics(["train/reward_mean", "turn_1/reward_mean",
                                                  "turn_1/expected_return"])}
    assert single["reward_mean per turn"].curves == (("all turns", "train/reward_mean"),)
    assert single["expected_return per turn"].curves == (("turn 1", "turn_1/expected_return"),)
    assert [c.section for c in charts] == ["team", "team", "agents", "eval", "reward", "perf"]
    assert default_charts(charts) == ["reward_mean per turn", "expected_return per turn", "loss per agent",
                                      "eval/pass@1"]
    assert default_charts(group_metrics(["train/reward_std", "agent/a/loss", "train/reward_mean"]), limit=2) == [
        "train/reward_mean", "loss per agent"]


def test_actions_follow_the_state() -> None:
    assert actions_for("running").stop and not actions_for("running").delete
    assert actions_for("queued").cancel and not actions_for("queued").stop
    assert not actions_for("stopping").stop  # already asked; the worker is settling it
    assert actions_for("stopped").resume and actions_for("stopped").delete
    assert not actions_for("succeeded").resume and actions_for("cancelled").delete
    assert format_duration(3725) == "1h 02m" and format_duration(65) == "1m 05s"
    assert format_duration(None) == "—"


def test_log_tail_reads_only_the_end(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert read_log(str(log), lines=3, max_bytes=256_000).text == "line 997\nline 998\nline 999"
    assert read_log(str(tmp_path / "missing.log")).text == ""
    assert read_log(None).text == ""


def test_system_and_actor_critic_metric_grouping() -> None:
    keys = ["train/reward_mean", "turn_1/reward_mean", "system/reward_mean", "trainer/plan/updated",
            "trainer/write/updated", "trainer/plan/agent/a/loss", "trainer/plan/agent/b/loss",
            "trainer/write/agent/c/loss", "critic/a/value_loss", "critic/b/value_loss", "perf/update_s"]
    charts = group_metrics(keys)
    by_title = {c.title: c for c in charts}
    assert by_title["updated per trainer"].curves == (("plan", "trainer/plan/updated"),
                                                      ("write", "trainer/write/updated"))
    assert by_title["trainer plan: loss per agent"].curves == (("a", "trainer/plan/agent/a/loss"),
                                                               ("b", "trainer/plan/agent/b/loss"))
    assert by_title["trainer write: loss per agent"].section == "trainer write"
    assert by_title["value_loss per critic"].curves == (("a", "critic/a/value_loss"), ("b", "critic/b/value_loss"))
    assert [c.section for c in charts] == ["team", "system", "system", "trainer plan", "trainer write", "agents",
                                           "perf"]
    assert default_charts(charts) == ["reward_mean per turn", "system/reward_mean", "trainer plan: loss per agent",
                                      "trainer write: loss per agent"]
