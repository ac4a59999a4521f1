"""Truncated importance sampling for a sampler that is not the trained policy (``rollout_correction``):
weights by hand, the loss they scale, when an agent is corrected, and a run sampling from bfloat16."""

from __future__ import annotations

import math

import pytest
import torch

from engine.trainer.agents import corrects_sampler
from engine.trainer.losses import policy_loss, tis_weights
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer, tiny_team

MASK = torch.tensor([[1, 1, 0]])


def test_weights_are_one_where_sampler_and_trainer_agree() -> None:
    logps = torch.log(torch.tensor([[0.5, 0.2, 0.9]]))
    weights, stats = tis_weights(logps, logps.clone(), MASK, cap=2.0)
    assert weights.tolist() == [[1.0, 1.0, 0.0]]  # padding carries no weight
    assert stats == {"sampler_kl": 0.0, "tis_clipped": 0.0}


def test_weights_are_the_ratio_clipped_at_the_cap() -> None:
    train = torch.log(torch.tensor([[0.5, 0.1, 0.3]]))
    sampler = torch.log(torch.tensor([[0.1, 0.2, 0.3]]))  # ratios 5 (clipped to 2) and 0.5
    weights, stats = tis_weights(train, sampler, MASK, cap=2.0)
    assert weights[0, :2].tolist() == pytest.approx([2.0, 0.5])
    assert weights[0, 2] == 0.0
    assert stats["tis_clipped"] == 0.5
    # k3 of KL(sampler || trainer) per token, d = log p_train - log p_sample: exp(d) - d - 1
    expected = ((5.0 - math.log(5.0) - 1.0) + (0.5 - math.log(0.5) - 1.0)) / 2
    assert stats["sampler_kl"] == pytest.approx(expected, rel=1e-5)


def test_token_weights_scale_each_token_s_policy_gradient_term() -> None:
    logps = torch.log(torch.tensor([[0.5, 0.25, 0.9]])).requires_grad_()
    adv = torch.tensor([2.0])
    plain, _ = policy_loss(logps, MASK, adv)
    ones, _ = policy_loss(logps, MASK, adv, token_weights=torch.ones(1, 3))
    assert torch.equal(plain, ones)
    halved, _ = policy_loss(logps, MASK, adv, token_weights=torch.tensor([[0.5, 1.0, 7.0]]))
    assert float(halved) == pytest.approx(-2.0 * (0.5 * math.log(0.5) + math.log(0.25)))
    halved.backward()
    assert logps.grad.tolist()[0][:2] == pytest.approx([-1.0, -2.0])  # d/dlogp of -A w logp; padding: no grad
    assert logps.grad[0, 2] == 0.0


def test_auto_corrects_agents_sampling_from_a_copy_in_another_dtype() -> None:
    bf16 = make_trainer(tiny_team(), fast_config(rollout_dtype="bfloat16", max_steps=1))
    assert all(corrects_sampler(a, "auto") for a in bf16.agents)
    assert not any(corrects_sampler(a, "none") for a in bf16.agents)
    same = make_trainer(tiny_team(), fast_config(rollout_dtype="float32", max_steps=1))
    assert not any(corrects_sampler(a, "auto") for a in same.agents)
    assert all(corrects_sampler(a, "tis") for a in same.agents)
    plain = make_trainer(tiny_team(), fast_config(max_steps=1))
    assert not any(corrects_sampler(a, "auto") for a in plain.agents)


@pytest.mark.parametrize("clip_epsilon", [None, 0.2])
def test_a_bfloat16_sampler_is_measured_and_corrected_by_default(clip_epsilon) -> None:
    trainer = make_trainer(tiny_team(), fast_config(rollout_dtype="bfloat16", clip_epsilon=clip_epsilon, max_steps=1))
    metrics, _ = trainer.train_step()
    assert metrics["perf/sampler_kl"] > 0.0  # the rounded copy is a (slightly) different policy
    assert 0.0 <= metrics["perf/tis_clipped"] <= 1.0
    assert {"agent/agent_0/sampler_kl", "agent/agent_1/tis_clipped"} <= set(metrics)
    off = make_trainer(tiny_team(), fast_config(rollout_dtype="bfloat16", clip_epsilon=clip_epsilon, max_steps=1,
                                            rollout_correction="none"))
    off_metrics, _ = off.train_step()
    assert "perf/sampler_kl" not in off_metrics


def test_the_correction_changes_the_update_only_by_the_weights() -> None:
    """Same seed, same samples: the corrected and the uncorrected first steps differ, and stay finite."""
    a = make_trainer(tiny_team(), fast_config(rollout_dtype="bfloat16", max_steps=1, rollout_correction="none"))
    b = make_trainer(tiny_team(), fast_config(rollout_dtype="bfloat16", max_steps=1, rollout_correction="tis",
                                          tis_cap=1e6))
    a.train_step()
    b.train_step()
    differ = any(not torch.equal(p, q) for p, q in zip(a.agents[0].model.parameters(),
                                                       b.agents[0].model.parameters(), strict=True))
    assert differ
    assert all(torch.isfinite(p).all() for p in b.agents[0].model.parameters())
