"""The DPO trainers anchor every margin on the initial policy by default (issue 39).

Reference-free DPO on summed log-probs (CoMLRL's only form) weighs a pair by how much the *initial*
policy already prefers its winner: ``1 - sigmoid(beta * sum_i d_i)``. A short winner (an early EOS)
is tens of nats likelier than a 16-token loser, so such pairs start saturated and teach nothing; on
issue 39's workload those are the short capital-dense answers. Anchored, every pair starts at margin
0, loss log 2 and weight 1/2, whatever the initial policy thought of it (the trainer's first step at
log 2 with anchoring: test_pref_trainer.py::test_resumed_run_equals_uninterrupted_run).
"""

from __future__ import annotations

import pytest
import torch

from engine import MADPOConfig
from engine.preference.loss import agent_dpo_loss
from engine.schema.configure import trainer_config
from engine.schema.preference_configs import MADPOIterConfig
from engine.schema.run_config import parse_run_config


def test_dpo_configs_and_run_configs_anchor_by_default() -> None:
    assert MADPOConfig().reference_free is False and MADPOIterConfig().reference_free is False
    run = parse_run_config({"agents": [{"name": "a"}, {"name": "b"}], "task": {"name": "quickstart"},
                            "trainer": {"algorithm": "madpo"}})
    assert trainer_config(run.trainer, run.agents).reference_free is False
    assert MADPOConfig(reference_free=True).reference_free is True  # CoMLRL's form stays one setting away


def test_a_pair_the_initial_policy_already_prefers_still_teaches() -> None:
    """Hand-computed: a pair whose winner the initial policy prefers by 60 nats (beta * 60 = 6) gets
    d loss / d own margin = -beta * (1 - sigmoid(6)) ~ -0.00025 reference-free, -beta / 2 anchored."""
    beta = 0.1
    for reference, slope in ((None, -beta * (1 - torch.sigmoid(torch.tensor(6.0)).item())),
                             (torch.tensor([[40.0], [20.0]]), -beta / 2)):
        own = torch.tensor([40.0], requires_grad=True)
        agent_dpo_loss(own, torch.tensor([[40.0], [20.0]]), 0, beta, reference).backward()
        assert own.grad.item() == pytest.approx(slope, rel=1e-4)

