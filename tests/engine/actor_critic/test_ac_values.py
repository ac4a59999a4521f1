"""Critics learn: on a fixed reward the values move toward their targets (single- and multi-turn),
per-agent rewards get per-agent values, and the actors' weights change."""

from __future__ import annotations

import math

import pytest

from engine.sinks import MemorySink
from tests.engine.actor_critic.ac_helpers import (
    ac_config,
    make_ac,
    per_agent_reward,
    value_error_by_turn,
)


def _snapshot(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _changed(before: dict, model) -> bool:
    return any(not bool((before[k] == v).all()) for k, v in model.state_dict().items())


@pytest.mark.parametrize(("kind", "extra"), [
    ("iac", {}),
    ("iac", {"use_separate_critic": False, "agent_learning_rate": 5e-3, "value_loss_coef": 1.0, "critic_type": "q"}),
    ("maac", {"critic_type": "q"}),
])
def test_single_turn_values_move_toward_the_fixed_reward(team, kind, extra) -> None:
    trainer = make_ac(kind, team, ac_config(kind, max_steps=6, **extra))
    before = value_error_by_turn(trainer, {0: 1.0})
    weights = [_snapshot(m) for m in team[0]]
    sink = MemorySink()
    trainer.train(sink=sink)
    after = value_error_by_turn(trainer, {0: 1.0})
    assert after[0] < 0.5 * before[0], (before, after)
    assert all(_changed(b, m) for b, m in zip(weights, team[0], strict=True))
    metrics = sink.steps[-1].metrics
    name = "critic/agent_0/" if kind == "iac" else "critic/"
    assert math.isfinite(metrics[name + "value_loss"]) and math.isfinite(metrics[name + "explained_variance"])
    assert math.isfinite(metrics["agent/agent_1/loss"]) and metrics["train/reward_mean"] == 1.0


@pytest.mark.parametrize("kind", ["iac", "maac"])
def test_multi_turn_values_move_toward_discounted_td_fixed_point(team, kind) -> None:
    # reward 1 at both turns, discount 0.5: V*(turn 2) = 1, V*(turn 1) = 1 + 0.5 * 1 = 1.5
    trainer = make_ac(kind, team, ac_config(kind, num_turns=2, discount=0.5, max_steps=8, rollout_buffer_size=8))
    fixed = {0: 1.5, 1: 1.0}
    before = value_error_by_turn(trainer, fixed)
    sink = MemorySink()
    trainer.train(sink=sink)
    after = value_error_by_turn(trainer, fixed)
    assert after[0] < 0.6 * before[0] and after[1] < 0.6 * before[1], (before, after)
    metrics = sink.steps[-1].metrics
    # K = 2 trajectories per item go on to turn 2 (CoMLRL forces K = 1 for multi-turn)
    assert metrics["turn_2/reward_mean"] == 1.0
    assert metrics["turn_1/expected_return"] == pytest.approx(1.5)


def test_per_agent_rewards_give_each_agent_its_own_targets(team) -> None:
    trainer = make_ac("maac", team, ac_config("maac", max_steps=5), reward_func=per_agent_reward)
    sink = MemorySink()
    trainer.train(sink=sink)
    metrics = sink.steps[-1].metrics
    assert metrics["agent/agent_0/reward_mean"] == 1.0 and metrics["agent/agent_1/reward_mean"] == 0.0
    rollout = trainer.rollout([{"prompt": "Count to 9:"}], [0])
    first = [s.old_value for s in rollout.samples(0)]
    second = [s.old_value for s in rollout.samples(1)]
    assert min(first) > max(second)  # the centralised critic's per-agent outputs separated


def test_maac_critic_steps_once_per_joint_sample(team) -> None:
    # buffer 4, K=2, 2 turns -> 1 item per step: 2 chains x 2 turns = 4 joint samples, batch 2 -> 2 steps
    trainer = make_ac("maac", team, ac_config("maac", num_turns=2, max_steps=1, train_batch_size=2))
    sink = MemorySink()
    trainer.train(sink=sink)
    metrics = sink.steps[0].metrics
    assert metrics["critic/samples"] == 4 and metrics["critic/optimizer_steps"] == 2
    assert sink.steps[0].env_step == 4


def test_reference_kl_is_subtracted_from_each_agents_reward(team) -> None:
    trainer = make_ac("iac", team, ac_config("iac", max_steps=3, reference_kl_enabled=True, reference_kl_coef=0.5,
                                             agent_learning_rate=1e-2))
    sink = MemorySink()
    trainer.train(sink=sink)
    first, last = sink.steps[0].metrics, sink.steps[-1].metrics
    assert first["train/reference_kl_mean"] == pytest.approx(0.0, abs=1e-5)  # policy == reference at first
    assert last["train/reference_kl_mean"] > 0
    # the fixed team reward is 1, so every reward is 1 - coef * KL
    assert last["train/reward_mean"] == pytest.approx(1.0 - 0.5 * last["train/reference_kl_mean"], abs=1e-5)
