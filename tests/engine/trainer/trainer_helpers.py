"""Datasets, rewards, transitions and helpers shared by the trainer tests (nothing is mocked)."""

from __future__ import annotations

from typing import Any

from engine import MAGRPOConfig, MAGRPOTrainer

DATA = [{"prompt": f"Count to {i}:", "n": i} for i in range(6)]


def length_reward(completions1, completions2):
    """Team reward: longer second answers score higher (varies between samples)."""
    return [len(completions2[0]) / 10.0 - abs(len(completions1[0]) - 5) / 10.0]


def echo_transition(prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent):
    """Each agent's next prompt repeats its own previous answer."""
    return [f"{prompt} You said: {c[:20]}" for c in agent_completions]


def tiny_team() -> tuple[list, list]:
    """Two tiny agents of different architectures (a Llama and a Qwen2), fixed weights: (models, tokenizers)."""
    from engine.models.tiny import build_tiny_model

    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, t2 = build_tiny_model("qwen2", "xs", seed=1)
    return [m1, m2], [t1, t2]


def fast_config(**overrides: Any) -> MAGRPOConfig:
    """A small, fast config with an explicit seed (0), so every trainer built from it repeats the same run."""
    values = dict(num_turns=1, num_generations=2, max_new_tokens=6, num_train_epochs=1, logging_steps=1,
                  agent_learning_rate=1e-3, eval_interval=0, max_steps=2, seed=0)
    values.update(overrides)
    return MAGRPOConfig(**values)


def make_trainer(team, config: MAGRPOConfig, **kwargs: Any) -> MAGRPOTrainer:
    models, tokenizers = team
    kwargs.setdefault("train_dataset", DATA)
    kwargs.setdefault("reward_func", length_reward)
    if config.num_turns > 1:
        kwargs.setdefault("external_transition", echo_transition)
    return MAGRPOTrainer(agents=models, tokenizer=tokenizers, args=config, **kwargs)


def snapshot(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def changed(before: dict, model) -> bool:
    after = model.state_dict()
    return any(not bool((before[k] == after[k]).all()) for k in before)
