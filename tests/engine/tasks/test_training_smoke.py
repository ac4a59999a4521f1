"""Every built-in task trains a few steps on tiny models through the real training entry point."""

from __future__ import annotations

import math

import pytest

from engine.build.run import run_training
from engine.schema.run_config import parse_run_config
from engine.sinks import MemorySink
from tests.engine.tasks.comlrl_fixtures import code_file, writing_files

TINY_TRAINER = {
    "max_steps": 2,
    "num_generations": 2,
    "max_new_tokens": 12,
    "agent_learning_rate": 1e-3,
    "temperature": 1.0,
    "top_p": 1.0,
    "eval_interval": 0,
    "transcripts_per_step": 1,
}


def train(tmp_path, task: str, roles: list[str], params: dict, **trainer) -> MemorySink:
    config = parse_run_config(
        {
            "name": f"smoke-{task}",
            "agents": [{"name": role, "model": "builtin:tiny-llama"} for role in roles],
            "task": {"name": task, "params": params},
            "trainer": {**TINY_TRAINER, "algorithm": "grpo" if len(roles) == 1 else "magrpo", **trainer},
        }
    )
    sink = MemorySink()
    result = run_training(config, output_dir=tmp_path, sink=sink)
    assert result.status == "completed" and len(sink.steps) == trainer.get("max_steps", 2)
    for report in sink.steps:
        assert math.isfinite(report.metrics["train/reward_mean"])
    return sink


@pytest.mark.parametrize(
    ("task", "roles", "params", "turns", "terms"),
    [
        ("quickstart", ["first", "second"], {"num_items": 2, "eval_items": 1}, 1, ["team", "first_part"]),
        ("writing", ["summary", "elaboration"], {"max_items": 4, "eval_items": 1}, 1, ["length_ratio", "coherence"]),
        ("self_refine", ["writer"], {"max_items": 3, "eval_items": 1}, 2, ["length", "relevance"]),
        ("role_switch", ["player"], {"max_items": 3, "eval_items": 1}, 2, ["length", "content"]),
    ],
)
def test_builtin_task_trains(tmp_path, task, roles, params, turns, terms):
    sink = train(tmp_path, task, roles, params, num_turns=turns)
    metrics = sink.steps[-1].metrics
    for term in terms:
        assert f"reward/{term}" in metrics
    if turns > 1:
        assert "turn_2/reward_mean" in metrics
        episode = sink.steps[-1].episodes[0]
        assert {record.turn for record in episode.turns} == {1, 2}


HUMANEVAL = {"train_slice": "0:2", "eval_slice": "2:3", "workers": 2, "sandbox_timeout_s": 3, "step_timeout_s": 1}


def test_humaneval_team_trains_two_turns_with_pass_at_k(tmp_path):
    sink = train(tmp_path, "humaneval", ["helper", "main"], HUMANEVAL, num_turns=2, eval_interval=2,
                 eval_num_samples=1)
    metrics = sink.steps[-1].metrics
    assert {"reward/structure", "reward/syntax", "reward/tests", "reward/cooperation"} <= set(metrics)
    assert "turn_2/reward_mean" in metrics
    turn_two = [r for r in sink.steps[-1].episodes[0].turns if r.turn == 2]
    assert turn_two and "Your previous code:" in turn_two[0].prompt
    evaluated = {key for _, _, logged in sink.metrics for key in logged}
    assert any(key.startswith("eval/pass@") for key in evaluated), sorted(evaluated)


def test_humaneval_single_agent_trains(tmp_path):
    sink = train(tmp_path, "humaneval", ["coder"], HUMANEVAL, max_steps=1)
    assert "reward/tests" in sink.steps[0].metrics and "reward/cooperation" not in sink.steps[0].metrics


def test_comlrl_benchmarks_train_on_fixture_files(tmp_path):
    """TLDR (one agent, both parts around the marker) and CoopHumanEval (two turns, CoMLRL's level reward and
    its level_passed feedback) train through the real entry point on files the test writes."""
    train_file, held_out = writing_files(tmp_path)
    sink = train(tmp_path / "tldr", "tldr", ["writer"], {"dataset": train_file, "eval_dataset": held_out}, max_steps=1)
    assert {f"reward/{level}" for level in ("structure", "coordination", "vocabulary", "style")} <= set(
        sink.steps[0].metrics)
    params = {"dataset": code_file(tmp_path, 3), "train_slice": "1:", "eval_slice": "0:1", "workers": 2,
              "sandbox_timeout_s": 3, "step_timeout_s": 1, "feedback_mode": "level_passed"}
    sink = train(tmp_path / "code", "coop_humaneval", ["helper", "main"], params, num_turns=2, max_steps=1)
    assert "reward/cooperation" in sink.steps[0].metrics and "turn_2/reward_mean" in sink.steps[0].metrics
    turn_two = [r for r in sink.steps[0].episodes[0].turns if r.turn == 2]
    assert turn_two and "All tests pass: no" in turn_two[0].prompt
