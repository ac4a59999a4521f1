"""The training step in one function, and the same step in a coordinator's two calls."""

from __future__ import annotations

import torch

from engine.models.tiny import build_tiny_model
from engine.trainer.magrpo import magrpo_step
from tests.engine.trainer.trainer_helpers import DATA, fast_config, make_trainer


def _team():
    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, t2 = build_tiny_model("qwen2", "xs", seed=1)
    return [m1, m2], [t1, t2]


def test_magrpo_step_equals_rollout_then_update_bit_for_bit() -> None:
    config = dict(num_turns=2, num_generations=2, items_per_step=1, rollout_buffer_size=6, discount=0.9,
                  reference_kl_enabled=True, reference_kl_coef=0.1, clip_epsilon=0.2, max_steps=2, credit_samples=8)
    stepped = make_trainer(_team(), fast_config(**config))
    driven = make_trainer(_team(), fast_config(**config))
    assert stepped.items_per_step == 1 and stepped.items_per_update == 2  # two rollouts in one step

    metrics, episodes = magrpo_step(stepped)
    indices = driven.items_for_step(0)
    rollouts = [driven.rollout([DATA[i]], [i]) for i in indices]
    update_metrics = driven.update(rollouts, advance_step=True)

    assert stepped.step == driven.step == 1 and episodes
    # the step also measures each agent's credit when asked (agent/<name>/credit); the update reports the rest
    assert {k: v for k, v in metrics.items() if k.startswith("agent/") and not k.endswith("/credit")} == update_metrics
    assert {f"agent/{name}/credit" for name in stepped.agent_names} <= set(metrics)
    for a, b in zip(stepped.agents, driven.agents, strict=True):
        for (name, p), q in zip(a.model.state_dict().items(), b.model.state_dict().values(), strict=True):
            assert torch.equal(p, q), name
    assert metrics["train/epoch"] == 1 and stepped.env_step == sum(r.env_steps for r in rollouts)
