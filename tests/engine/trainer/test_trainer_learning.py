"""The trainer learns: on a simple cooperative reward a tiny two-agent team's reward rises clearly
within a bounded number of steps (mean of two seeds; a single sampling seed is too noisy)."""

from __future__ import annotations

import statistics

import pytest

from engine import MAGRPOConfig, MAGRPOTrainer
from engine.models.tiny import build_tiny_model
from engine.sinks import MemorySink

PROMPTS = [{"prompt": p} for p in ("Count:", "Numbers:", "Write:", "Go:")]
STEPS = 25


def digit_share(completions1, completions2):
    """Team reward: the share of digit characters across both agents' answers."""
    text = completions1[0] + completions2[0]
    return [sum(ch.isdigit() for ch in text) / max(len(text), 1)]


def _curve(seed: int) -> list[float]:
    m1, t1 = build_tiny_model("llama", "xs", seed=seed)
    m2, t2 = build_tiny_model("llama", "xs", seed=seed + 10)
    config = MAGRPOConfig(num_turns=1, num_generations=4, max_new_tokens=8, temperature=1.0, top_p=1.0, top_k=50,
                          agent_learning_rate=1e-3, max_steps=STEPS, num_train_epochs=100, logging_steps=1,
                          eval_interval=0, seed=seed, transcripts_per_step=0)
    sink = MemorySink()
    MAGRPOTrainer(agents=[m1, m2], tokenizer=[t1, t2], train_dataset=PROMPTS, reward_func=digit_share,
                  args=config, sink=sink).train()
    return [s.metrics["train/reward_mean"] for s in sink.steps]


@pytest.mark.slow
def test_team_reward_rises_on_a_learnable_reward() -> None:
    curves = [_curve(seed) for seed in (0, 1)]
    start = statistics.mean(x for c in curves for x in c[:5])
    end = statistics.mean(x for c in curves for x in c[-5:])
    assert end > start + 0.05 and end > 2 * start, (start, end)
