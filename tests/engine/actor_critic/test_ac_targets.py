"""The critic's arithmetic, checked against values worked out by hand."""

from __future__ import annotations

import pytest
import torch

from engine.actor_critic.targets import (
    discounted_returns,
    explained_variance,
    normalize,
    td_targets,
    value_loss,
)


def test_td_targets_bootstrap_from_the_next_value_and_end_at_the_last_reward() -> None:
    # y0 = 1 + 0.9 * 1.0 = 1.9; y1 = 2 + 0.9 * 2.0 = 3.8; y2 = 3 (terminal)
    assert td_targets([1.0, 2.0, 3.0], [0.5, 1.0, 2.0], 0.9) == pytest.approx([1.9, 3.8, 3.0])
    assert td_targets([1.0, 2.0], [5.0, 7.0], 0.0) == [1.0, 2.0]
    assert td_targets([4.0], [9.0], 1.0) == [4.0]


def test_td_targets_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="2 rewards but 1 values"):
        td_targets([1.0, 2.0], [0.0], 0.5)
    with pytest.raises(ValueError, match="discount"):
        td_targets([1.0], [0.0], 1.5)


def test_discounted_returns_are_reward_to_go() -> None:
    # G2 = 3; G1 = 2 + 0.5 * 3 = 3.5; G0 = 1 + 0.5 * 3.5 = 2.75
    assert discounted_returns([1.0, 2.0, 3.0], 0.5) == pytest.approx([2.75, 3.5, 3.0])


def test_value_loss_unclipped_is_the_mean_squared_error() -> None:
    values = torch.tensor([1.0, 3.0])
    targets = torch.tensor([0.0, 1.0])
    # ((1-0)^2 + (3-1)^2) / 2 = 2.5
    assert float(value_loss(values, values, targets, None)) == pytest.approx(2.5)


def test_value_loss_clipping_keeps_the_larger_error() -> None:
    old = torch.tensor([0.0, 0.0])
    values = torch.tensor([1.0, -0.1])
    targets = torch.tensor([1.0, 1.0])
    # row 0: unclipped 0; clipped value 0.2 -> 0.64; max 0.64
    # row 1: unclipped 1.21; clipped -0.1 (inside the range) -> 1.21
    assert float(value_loss(values, old, targets, 0.2)) == pytest.approx((0.64 + 1.21) / 2)


def test_explained_variance_by_hand() -> None:
    # y = [1, 2, 3] (var 2/3); errors y - v = [0, 0, 1] (var 2/9) -> 1 - (2/9)/(2/3) = 2/3
    assert explained_variance([1.0, 2.0, 2.0], [1.0, 2.0, 3.0]) == pytest.approx(2 / 3)
    assert explained_variance([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert explained_variance([2.0, 2.0, 2.0], [1.0, 2.0, 3.0]) == pytest.approx(0.0)
    assert explained_variance([5.0, 5.0], [5.0, 5.0]) == 1.0
    assert explained_variance([4.0, 5.0], [5.0, 5.0]) == 0.0


def test_normalize_z_scores_and_leaves_constant_groups_at_zero() -> None:
    out = normalize(torch.tensor([1.0, 3.0], dtype=torch.float64))
    assert out.tolist() == pytest.approx([-1.0, 1.0])
    assert normalize(torch.tensor([2.0, 2.0])).tolist() == [0.0, 0.0]
    assert normalize(torch.tensor([7.0])).tolist() == [0.0]
