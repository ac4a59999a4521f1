"""Team analysis: the variants and contributions by hand, and on the quick start a trained team that
beats every variant with an agent reset to its base model (each agent mattered)."""

from __future__ import annotations

import math

import pytest

from engine.build.run import run_training
from engine.evaluation.evaluate import EvalError, find_checkpoint
from engine.evaluation.team_analysis import analysis_variants, analyze_team, contributions
from engine.schema.run_config import parse_run_config
from engine.sinks import NullSink


def test_the_variants_of_two_and_three_agents() -> None:
    two = analysis_variants(["a", "b"], swappable=True)
    assert [(v.label, v.weights) for v in two] == [
        ("trained", (("trained", 0), ("trained", 1))),
        ("base", (("base", 0), ("base", 1))),
        ("a reset", (("base", 0), ("trained", 1))),
        ("b reset", (("trained", 0), ("base", 1))),
        ("roles swapped", (("trained", 1), ("trained", 0))),
    ]  # "a alone trained" is "b reset": shown once
    three = [v.label for v in analysis_variants(["a", "b", "c"], swappable=True)]
    assert three == ["trained", "base", "a reset", "b reset", "c reset", "a alone trained", "b alone trained",
                     "c alone trained"]  # no swap beyond two agents
    assert [v.label for v in analysis_variants(["solo"], swappable=False)] == ["trained", "base"]
    assert "roles swapped" not in [v.label for v in analysis_variants(["a", "b"], swappable=False)]


def test_contribution_is_the_drop_when_an_agent_alone_is_reset() -> None:
    rows = {"trained": (0.9, 0.03), "a reset": (0.5, 0.04), "b reset": (0.8, 0.0)}
    got = contributions(rows, ["a", "b"])
    assert got["a"] == pytest.approx((0.4, 0.05))  # sqrt(0.03^2 + 0.04^2) = 0.05
    assert got["b"] == pytest.approx((0.1, 0.03))


QUICKSTART = {
    "name": "team-analysis",
    "agents": [{"name": "first", "model": "builtin:tiny-llama"}, {"name": "second", "model": "builtin:tiny-llama"}],
    "task": {"name": "quickstart", "params": {}},
    "trainer": {"algorithm": "magrpo", "max_steps": 40, "num_generations": 8, "agent_learning_rate": 1e-3,
                "max_new_tokens": 12, "top_k": 50, "rollout_buffer_size": 1, "eval_interval": 0, "seed": 0},
}


@pytest.mark.slow
def test_on_the_quick_start_the_trained_team_beats_every_reset_variant(tmp_path) -> None:
    config = parse_run_config(QUICKSTART)
    assert run_training(config, output_dir=tmp_path, sink=NullSink()).status == "completed"
    analysis = analyze_team(config, find_checkpoint(tmp_path, "last"), samples=4, seed=1)
    table = {v.label: m["eval/reward_mean"] for v, m, _ in analysis.rows}
    assert set(table) == {"trained", "base", "first reset", "second reset", "roles swapped"}
    assert analysis.checkpoint_step == 40 and analysis.items == 4 and analysis.samples == 4
    for label in ("base", "first reset", "second reset", "roles swapped"):
        assert table["trained"] > table[label], (label, analysis.table())
    for name in ("first", "second"):
        drop, se = analysis.contribution[name]
        assert drop == pytest.approx(table["trained"] - table[f"{name} reset"])
        assert drop > 0.1 and drop > 2 * se, analysis.table()
    assert "contribution of first" in analysis.table() and math.isfinite(analysis.contribution["first"][1])


def test_agents_sharing_one_model_are_refused(tmp_path) -> None:
    shared = {**QUICKSTART, "agents": [{"name": "first", "model": "builtin:tiny-llama"},
                                       {"name": "second", "share_weights_with": "first"}],
              "trainer": {**QUICKSTART["trainer"], "max_steps": 1}}
    config = parse_run_config(shared)
    assert run_training(config, output_dir=tmp_path, sink=NullSink()).status == "completed"
    with pytest.raises(EvalError, match="agents that share one model cannot be"):
        analyze_team(config, find_checkpoint(tmp_path, "last"))
