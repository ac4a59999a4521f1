"""A tiny two-agent team, a reward that separates answers, and a MADPO trainer factory (nothing mocked)."""

from __future__ import annotations

from typing import Any

from engine import MADPOConfig, MADPOTrainer
from engine.models.tiny import build_tiny_model

PROMPTS = [{"prompt": p} for p in ("Count:", "Numbers:", "Write:", "Go:")]


def digit_share(completions1, completions2):
    """Team reward: the share of digit characters across both agents' answers."""
    text = completions1[0] + completions2[0]
    return [sum(ch.isdigit() for ch in text) / max(len(text), 1)]


def tiny_team(seed: int = 0) -> tuple[list, list]:
    m1, t1 = build_tiny_model("llama", "xs", seed=seed)
    m2, t2 = build_tiny_model("qwen2", "xs", seed=seed + 1)
    return [m1, m2], [t1, t2]


def fast_config(**overrides: Any) -> MADPOConfig:
    values = dict(preference_num_candidates=4, preference_pairs_per_sample=2, max_new_tokens=6, num_train_epochs=2,
                  logging_steps=1, eval_interval=0, agent_learning_rate=1e-3, items_per_step=2,
                  seed=0)  # explicit: every trainer built from it repeats the same run
    values.update(overrides)
    return MADPOConfig(**values)


def make_trainer(config: MADPOConfig, team: tuple[list, list] | None = None, **kwargs: Any) -> MADPOTrainer:
    models, tokenizers = team or tiny_team()
    kwargs.setdefault("train_dataset", PROMPTS)
    kwargs.setdefault("reward_func", digit_share)
    return MADPOTrainer(agents=models, tokenizer=tokenizers, args=config, **kwargs)


def weights(trainer) -> list[dict]:
    return [{k: v.detach().clone() for k, v in a.model.state_dict().items()} for a in trainer.agents]
