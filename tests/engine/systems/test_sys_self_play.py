"""Self-play and self-improvement with one trainer and one agent: the shipped transitions
(revise-with-feedback, alternate-roles) drive a two-turn run for a couple of steps."""

from __future__ import annotations

import math

import pytest

from engine.build.run import build_trainer
from engine.schema.run_config import parse_run_config
from engine.sinks import MemorySink


def _config(task: str, algorithm: str = "grpo"):
    return parse_run_config({
        "name": f"self-play-{task}",
        "agents": [{"name": "solo", "model": "builtin:tiny-llama"}],
        "task": {"name": task, "params": {"max_items": 4, "eval_items": 0}},
        "trainer": {"algorithm": algorithm, "num_turns": 2, "num_generations": 2, "max_new_tokens": 4,
                    "max_steps": 2, "eval_interval": 0, "agent_learning_rate": 1e-3, "transcripts_per_step": 1},
    })


@pytest.mark.parametrize(("task", "turn_two_marker"), [
    ("self_refine", "Your previous answer:"),
    ("role_switch", "You are the elaborator."),
])
def test_one_agent_trains_on_each_transition(tmp_path, task, turn_two_marker) -> None:
    trainer = build_trainer(_config(task), output_dir=tmp_path)
    assert trainer.num_agents == 1
    sink = MemorySink()
    result = trainer.train(sink=sink)
    assert result.status == "completed" and result.step == 2
    metrics = sink.steps[-1].metrics
    assert math.isfinite(metrics["agent/solo/loss"]) and "turn_2/reward_mean" in metrics
    episode = sink.steps[0].episodes[0]
    first, second = episode.turns
    assert (first.turn, second.turn) == (1, 2)
    assert turn_two_marker in second.prompt and turn_two_marker not in first.prompt
    if task == "self_refine":
        assert first.completion in second.prompt  # the revision request quotes the previous answer


def test_actor_critic_self_refinement_with_one_agent(tmp_path) -> None:
    trainer = build_trainer(_config("self_refine", algorithm="iac"), output_dir=tmp_path)
    sink = MemorySink()
    result = trainer.train(sink=sink)
    assert result.status == "completed"
    metrics = sink.steps[-1].metrics
    assert math.isfinite(metrics["critic/solo/value_loss"]) and "turn_2/expected_return" in metrics
    turns = sink.steps[0].episodes[0].turns
    assert "Your previous answer:" in turns[1].prompt and turns[0].completion in turns[1].prompt
