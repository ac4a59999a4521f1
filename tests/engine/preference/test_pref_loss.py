"""The MADPO loss on fixed margins, against values worked out by hand.

Two agents, two pairs, beta 0.1. Margins d (rows: agents, columns: pairs) = [[1.0, -0.5], [0.5, 0.5]]:
joint margins are 1.5 and 0.0, so the loss is (log(1 + e^-0.15) + log 2) / 2 = (0.620957 + 0.693147) / 2.
"""

from __future__ import annotations

import math

import pytest
import torch

from engine.preference.loss import agent_dpo_loss, joint_margins, pair_statistics

DELTAS = [[1.0, -0.5], [0.5, 0.5]]
BETA = 0.1


def _live(row: list[float]) -> torch.Tensor:
    return torch.tensor(row, dtype=torch.float64, requires_grad=True)


def test_reference_free_loss_is_the_joint_preference() -> None:
    deltas = torch.tensor(DELTAS, dtype=torch.float64)
    assert joint_margins(deltas).tolist() == [1.5, 0.0]
    for agent in (0, 1):
        loss = agent_dpo_loss(_live(DELTAS[agent]), deltas, agent, BETA)
        assert loss.item() == pytest.approx(0.6570521, abs=1e-6)  # the same joint loss for each agent


def test_gradient_reaches_only_the_agents_own_margin() -> None:
    """d loss_0 / d d_0 = -beta * sigmoid(-beta * m) / B per pair; the partners' margins get none."""
    own = _live(DELTAS[0])
    partner = _live(DELTAS[1])
    everyone = torch.stack([own, partner])  # on the graph: a leak would give partner a gradient
    agent_dpo_loss(own, everyone, 0, BETA).backward()
    assert own.grad.tolist() == pytest.approx([-0.1 / (1 + math.exp(0.15)) / 2, -0.1 * 0.5 / 2], abs=1e-9)
    assert own.grad.tolist() == pytest.approx([-0.0231285, -0.025], abs=1e-6)
    assert partner.grad is None


def test_reference_anchored_loss_subtracts_the_reference_margins() -> None:
    """Reference margins [[0.4, 0.0], [0.1, 0.5]] sum to 0.5 per pair: joint margins 1.0 and -0.5,
    loss (log(1 + e^-0.1) + log(1 + e^0.05)) / 2 = (0.644397 + 0.718460) / 2."""
    deltas = torch.tensor(DELTAS, dtype=torch.float64)
    reference = torch.tensor([[0.4, 0.0], [0.1, 0.5]], dtype=torch.float64)
    assert joint_margins(deltas, reference).tolist() == pytest.approx([1.0, -0.5])
    loss = agent_dpo_loss(_live(DELTAS[1]), deltas, 1, BETA, reference)
    assert loss.item() == pytest.approx(0.6814282, abs=1e-6)
    assert agent_dpo_loss(_live([0.0, 0.0]), torch.zeros(2, 2), 0, BETA, torch.zeros(2, 2)).item() == pytest.approx(
        math.log(2))  # policy == reference: no preference yet


def test_batch_statistics() -> None:
    stats = pair_statistics(torch.tensor(DELTAS), BETA)
    assert stats["dpo/loss"] == pytest.approx(0.6570521, abs=1e-6)
    assert stats["dpo/accuracy"] == 0.5  # margin 1.5 > 0, margin 0.0 is not
    assert stats["dpo/joint_margin_mean"] == pytest.approx(0.75)
