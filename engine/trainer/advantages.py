"""Credit assignment on the rollout tree: returns, partner marginalisation and group baselines.

All functions are pure (lists or 1-D tensors in, same out) so they can be checked by hand.
The group of a node is its siblings: the K (aligned) or K^N (cross) joint actions sampled from the
same history. Baselines are taken within that group, as in MAGRPO / TreeRPO.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

ADVANTAGE_EPS = 1e-6


def node_returns(rewards: Sequence[float], child_returns: Sequence[Sequence[float] | None],
                 discount: float) -> list[float]:
    """Return of each joint action at a node: ``R_j = r_j + discount * mean(R of child_j)``.

    ``child_returns[j]`` holds the returns of joint action j's child node, or ``None`` for a leaf
    (last turn, or a branch stopped early). CoMLRL 1.4.3 uses ``discount = 1`` whatever is set.
    """
    if len(rewards) != len(child_returns):
        raise ValueError(f"{len(rewards)} rewards but {len(child_returns)} child entries")
    out = []
    for reward, children in zip(rewards, child_returns, strict=True):
        if children:
            out.append(float(reward) + discount * sum(children) / len(children))
        else:
            out.append(float(reward))
    return out


def marginal_returns(returns: Sequence[float], joint_actions: Sequence[Sequence[int]], agent: int,
                     num_generations: int) -> list[float]:
    """Agent ``agent``'s value for each of its K samples: the *mean* return over the joint actions
    that use that sample.

    In aligned mode each sample appears in exactly one joint action, so this is the return itself.
    In cross mode sample k appears in K^(N-1) joint actions (one per combination of partners); the
    mean marginalises the partners out. CoMLRL sums instead, which scales advantages by K^(N-1)
    before normalisation and breaks the raw/max baselines.
    """
    totals = [0.0] * num_generations
    counts = [0] * num_generations
    for value, joint in zip(returns, joint_actions, strict=True):
        totals[joint[agent]] += float(value)
        counts[joint[agent]] += 1
    missing = [k for k, c in enumerate(counts) if c == 0]
    if missing:
        raise ValueError(f"agent {agent}'s samples {missing} appear in no joint action")
    return [t / c for t, c in zip(totals, counts, strict=True)]


def group_advantages(values: torch.Tensor, mode: str, normalize: bool) -> torch.Tensor:
    """Advantages of one sibling group (1-D tensor of returns, one per sample).

    * ``mean``: ``R - mean(R)`` (MAGRPO)
    * ``raw``: ``R`` (REINFORCE, no baseline)
    * ``max``: ``R - max(R)`` (ReMax)
    * ``rloo``: ``R - mean(others) = (K R - sum R) / (K - 1)`` (leave-one-out)

    With ``normalize`` (and more than one sample) the result is z-scored with the population
    standard deviation, floored at 1e-6 so a group of equal values gives zeros, not NaN.
    """
    if values.dim() != 1:
        raise ValueError(f"expected a 1-D group of returns, got shape {tuple(values.shape)}")
    values = values.to(torch.float64)
    k = values.numel()
    if mode == "mean":
        adv = values - values.mean()
    elif mode == "raw":
        adv = values.clone()
    elif mode == "max":
        adv = values - values.max()
    elif mode == "rloo":
        if k < 2:
            raise ValueError("rloo needs at least 2 samples per group")
        adv = (k * values - values.sum()) / (k - 1)
    else:
        raise ValueError(f"advantage_mode must be one of mean, raw, max, rloo; got {mode!r}")
    if normalize and k > 1:
        adv = (adv - adv.mean()) / adv.std(unbiased=False).clamp_min(ADVANTAGE_EPS)
    return adv


def pooled_groups(groups: Sequence[tuple[int, int]], keys: Sequence[Hashable]) -> list[list[int]]:
    """Sample indices of the groups that share a key, merged, in first-seen order: ``groups[g]`` is a
    node's sibling range ``[start, end)`` and ``keys[g]`` its pool (``turn_group``: the item's tree
    and the turn, so an agent's samples at every node of one turn of one item form one group)."""
    if len(groups) != len(keys):
        raise ValueError(f"{len(groups)} groups but {len(keys)} keys")
    pools: dict[Hashable, list[int]] = {}
    for (start, end), key in zip(groups, keys, strict=True):
        pools.setdefault(key, []).extend(range(start, end))
    return list(pools.values())


def normalize_batch(advantages: torch.Tensor) -> torch.Tensor:
    """z-score a whole batch (used for per-agent normalisation across all of an agent's nodes)."""
    if advantages.numel() < 2:
        return advantages
    return (advantages - advantages.mean()) / advantages.std(unbiased=False).clamp_min(ADVANTAGE_EPS)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator: probability that at least one of k draws (without replacement)
    from n samples, c of them correct, is correct: ``1 - C(n-c, k) / C(n, k)``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prob_all_wrong = 1.0
    for i in range(n - c + 1, n + 1):
        prob_all_wrong *= 1.0 - k / i
    return 1.0 - prob_all_wrong
