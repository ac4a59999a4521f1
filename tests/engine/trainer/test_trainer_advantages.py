"""Hand-computed checks of returns, partner marginalisation, baselines and pass@k."""

from __future__ import annotations

import math

import pytest
import torch

from engine.trainer.evaluation import pass_at_k
from engine.trainer.magrpo import group_advantages, marginal_returns, normalize_batch
from engine.trainer.rollout import joint_action_indices, node_returns, nodes_per_item


def test_node_returns_discounts_the_mean_of_the_children() -> None:
    # joint 0 has children with returns [2, 4] (mean 3); joint 1 is a leaf
    assert node_returns([1.0, 0.5], [[2.0, 4.0], None], discount=0.5) == [1.0 + 0.5 * 3.0, 0.5]
    assert node_returns([1.0], [[2.0, 4.0]], discount=1.0) == [4.0]
    assert node_returns([1.0], [[2.0]], discount=0.0) == [1.0]


def test_node_returns_rejects_mismatched_children() -> None:
    with pytest.raises(ValueError, match="2 rewards but 1 child"):
        node_returns([1.0, 2.0], [None], 1.0)


def test_marginal_returns_aligned_is_identity() -> None:
    joint = joint_action_indices("aligned", 2, 3)
    assert joint == [(0, 0), (1, 1), (2, 2)]
    assert marginal_returns([1.0, 2.0, 3.0], joint, agent=1, num_generations=3) == [1.0, 2.0, 3.0]


def test_marginal_returns_cross_takes_the_mean_over_partners() -> None:
    joint = joint_action_indices("cross", 2, 2)
    assert joint == [(0, 0), (0, 1), (1, 0), (1, 1)]
    returns = [1.0, 3.0, 5.0, 7.0]
    # agent 0's sample 0 is in joints 0 and 1 -> (1+3)/2; sample 1 in joints 2, 3 -> (5+7)/2
    assert marginal_returns(returns, joint, agent=0, num_generations=2) == [2.0, 6.0]
    # agent 1's sample 0 is in joints 0 and 2 -> (1+5)/2; sample 1 in 1, 3 -> (3+7)/2
    assert marginal_returns(returns, joint, agent=1, num_generations=2) == [3.0, 5.0]


def test_tree_size_counts_every_node() -> None:
    assert nodes_per_item("aligned", 2, 4, 2) == 1 + 4
    assert nodes_per_item("cross", 2, 2, 2) == 1 + 4
    assert nodes_per_item("cross", 3, 2, 3) == 1 + 8 + 64


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("mean", [-1.0, 0.0, 1.0]),  # mean 2
        ("raw", [1.0, 2.0, 3.0]),
        ("max", [-2.0, -1.0, 0.0]),
        ("rloo", [-1.5, 0.0, 1.5]),  # 1 - (2+3)/2, 2 - (1+3)/2, 3 - (1+2)/2
    ],
)
def test_group_advantages_without_normalisation(mode: str, expected: list[float]) -> None:
    out = group_advantages(torch.tensor([1.0, 2.0, 3.0]), mode, normalize=False)
    assert out.tolist() == pytest.approx(expected)


def test_group_advantages_normalised_uses_population_std() -> None:
    # R - mean = [-1, 0, 1]; population std = sqrt(2/3)
    out = group_advantages(torch.tensor([1.0, 2.0, 3.0]), "mean", normalize=True)
    s = math.sqrt(2 / 3)
    assert out.tolist() == pytest.approx([-1 / s, 0.0, 1 / s])


def test_equal_returns_give_zero_advantages_not_nan() -> None:
    out = group_advantages(torch.tensor([2.0, 2.0, 2.0, 2.0]), "mean", normalize=True)
    assert out.tolist() == [0.0, 0.0, 0.0, 0.0]


def test_unknown_mode_is_named() -> None:
    with pytest.raises(ValueError, match="advantage_mode"):
        group_advantages(torch.tensor([1.0, 2.0]), "median", normalize=False)


def test_normalize_batch() -> None:
    out = normalize_batch(torch.tensor([0.0, 2.0], dtype=torch.float64))
    assert out.tolist() == pytest.approx([-1.0, 1.0])


def test_pass_at_k_unbiased_estimator() -> None:
    # n=4, c=1: pass@1 = 1/4; pass@2 = 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    assert pass_at_k(4, 0, 3) == 0.0
    assert pass_at_k(4, 2, 3) == 1.0  # only 2 wrong samples: any 3 contain a correct one
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)
