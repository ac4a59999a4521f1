"""Data, rewards and a trainer factory shared by the actor-critic tests (nothing is mocked)."""

from __future__ import annotations

from typing import Any

from engine.actor_critic import IACConfig, IACTrainer, MAACConfig, MAACTrainer

DATA = [{"prompt": f"Count to {i}:"} for i in range(4)]


def constant_reward(c1, c2):
    """A fixed team reward: the critic's targets are known in closed form."""
    return [1.0]


def per_agent_reward(c1, c2):
    """One reward per agent: the first agent always gets 1, the second 0."""
    return [1.0, 0.0]


def again_transition(prompt, agent_completions, num_agents, prompt_history_per_agent, response_history_per_agent):
    return [f"{prompt} Again, agent {i}:" for i in range(num_agents)]


def ac_config(kind: str, **overrides: Any):
    values = dict(num_turns=1, num_generations=2, max_new_tokens=4, agent_learning_rate=1e-4,
                  critic_learning_rate=5e-3, rollout_buffer_size=4, eval_interval=0, max_steps=2, top_k=20,
                  seed=0)  # a given seed: without one a run continues the global RNG and depends on earlier tests
    values.update(overrides)
    return (IACConfig if kind == "iac" else MAACConfig)(**values)


def make_ac(kind: str, team, config, **kwargs: Any):
    models, tokenizers = team
    kwargs.setdefault("train_dataset", DATA)
    kwargs.setdefault("reward_func", constant_reward)
    if config.num_turns > 1:
        kwargs.setdefault("external_transition", again_transition)
    cls = IACTrainer if kind == "iac" else MAACTrainer
    return cls(agents=models, tokenizer=tokenizers, args=config, **kwargs)


def value_error_by_turn(trainer, fixed_point: dict[int, float]) -> dict[int, float]:
    """Mean |V_old - V*| per turn over a fresh rollout of every item (V* known for a fixed reward)."""
    rollout = trainer.rollout(DATA, list(range(len(DATA))))
    errors: dict[int, list[float]] = {}
    for agent in range(trainer.num_agents):
        for s in rollout.samples(agent):
            errors.setdefault(s.turn, []).append(abs(s.old_value - fixed_point[s.turn]))
    return {t: sum(v) / len(v) for t, v in errors.items()}
