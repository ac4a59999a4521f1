"""The critic's arithmetic: TD(0) targets, advantages, clipped value loss, explained variance.

Pure functions over lists or tensors, checked by hand in the tests. A trajectory of one agent is
its rewards ``r_0 .. r_{T-1}`` and the critic's values ``V_0 .. V_{T-1}`` recorded at rollout
time (before any update); ``T`` may differ between trajectories (early termination).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

EPS = 1e-8


def td_targets(rewards: Sequence[float], values: Sequence[float], discount: float) -> list[float]:
    """One-step TD targets of a trajectory: ``y_t = r_t + discount * V_{t+1}``, and ``y_{T-1} = r_{T-1}``.

    The last turn bootstraps from nothing because the episode ends there (a terminal state).
    """
    if len(rewards) != len(values):
        raise ValueError(f"td_targets: {len(rewards)} rewards but {len(values)} values")
    if not 0.0 <= discount <= 1.0:
        raise ValueError(f"td_targets: discount must be in [0, 1], got {discount}")
    out = []
    for t, reward in enumerate(rewards):
        bootstrap = discount * float(values[t + 1]) if t + 1 < len(values) else 0.0
        out.append(float(reward) + bootstrap)
    return out


def discounted_returns(rewards: Sequence[float], discount: float) -> list[float]:
    """Reward-to-go ``G_t = r_t + discount * G_{t+1}`` (what evaluation reports as expected return)."""
    out = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + discount * running
        out[t] = running
    return out


def normalize(values: torch.Tensor) -> torch.Tensor:
    """z-score a 1-D tensor (population std, floored); one element or a constant group gives zeros."""
    if values.numel() < 2:
        return values - values.mean() if values.numel() else values
    return (values - values.mean()) / values.std(unbiased=False).clamp_min(1e-6)


def value_loss(values: torch.Tensor, old_values: torch.Tensor, targets: torch.Tensor,
               clip_range: float | None) -> torch.Tensor:
    """Mean squared error of the values against the targets, PPO-clipped when ``clip_range`` is set.

    Clipped: ``max((V - y)^2, (V_old + clip(V - V_old, -c, c) - y)^2)``: a value may not move more
    than ``c`` from its rollout-time estimate in one update without paying the full error.
    """
    unclipped = (values - targets) ** 2
    if clip_range is None:
        return unclipped.mean()
    moved = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
    clipped = (moved - targets) ** 2
    return torch.maximum(unclipped, clipped).mean()


def explained_variance(predictions: Sequence[float], targets: Sequence[float]) -> float:
    """``1 - Var(y - v) / Var(y)``: 1 is perfect, 0 no better than a constant, negative worse.

    With constant targets (zero variance) it is 1.0 when the predictions hit them and 0.0 otherwise.
    """
    if len(predictions) != len(targets):
        raise ValueError(f"explained_variance: {len(predictions)} predictions but {len(targets)} targets")
    if not targets:
        return 0.0
    y = torch.tensor([float(t) for t in targets], dtype=torch.float64)
    v = torch.tensor([float(p) for p in predictions], dtype=torch.float64)
    var_y = float(y.var(unbiased=False))
    var_err = float((y - v).var(unbiased=False))
    if var_y < EPS:
        return 1.0 if float((y - v).abs().max()) < 1e-6 else 0.0
    return 1.0 - var_err / var_y
