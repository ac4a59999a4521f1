"""Credit assignment on the rollout tree: returns, partner marginalisation and group baselines.

All functions are pure (lists or 1-D tensors in, same out) so they can be checked by hand.
The group of a node is its siblings: the K (aligned) or K^N (cross) joint actions sampled from the
same history. Baselines are taken within that group, as in MAGRPO / TreeRPO.

A sample's value is its return, less the KL penalty when the KL is in the reward; an agent's
advantages are then group-relative within each group (:func:`batch_advantages`), optionally
z-scored once more over all its samples (:func:`per_agent_normalized`).

Counterfactual credit, at one node of the rollout tree:

With one team reward, agent i's group-relative advantage also carries its partners' luck: its good
sample, drawn next to a partner's bad one, is punished. The counterfactual estimator (a difference
reward, leave-one-out over the agent's own samples) compares the joint action that was taken with the
same joint action where only agent i's sample is replaced by each of its other K - 1 samples,
partners held fixed::

    A_i(j) = Q(j) - mean_{k' != j_i} Q(j with agent i's sample replaced by k')

The replaced joint actions need extra reward calls, never extra generation. In ``cross`` mode every
combination is a joint action already (no extra call), and the estimator equals the leave-one-out
baseline on the partner-marginalised returns. A replaced joint action has no child node, so on a
non-final turn its value is its immediate reward plus the mean continuation (return less reward)
of the node's joint actions.

A second, cheaper quantity shows who contributed without training on it (:func:`removal_credit`):
the team reward less the reward with agent i's reply left empty.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import torch

ADVANTAGE_EPS = 1e-6
JointAction = tuple[int, ...]


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


def sample_values(returns: Sequence[float], kl: Sequence[float] | None, kl_in_reward_coef: float) -> list[float]:
    """Each sample's value: its return, less ``kl_in_reward_coef * kl`` when the KL is in the reward."""
    if not kl_in_reward_coef or kl is None:
        return list(returns)
    return [v - kl_in_reward_coef * d for v, d in zip(returns, kl, strict=True)]


def batch_advantages(values: Sequence[float], groups: Sequence[tuple[int, int]], *, mode: str, normalize: bool,
                     per_agent_normalization: bool, pools: Sequence[Hashable] | None = None) -> list[float]:
    """Group-relative advantages of one agent's samples (pure function): the baseline is taken among
    the siblings of each group ``groups[g] = (start, end)``, or, with ``pools``, among every sample
    of the groups that share a pool key (``turn_group``); with ``per_agent_normalization`` the
    agent's advantages are z-scored once more over all its samples, so agents whose returns live on
    different scales get comparable steps."""
    members = pooled_groups(groups, pools) if pools is not None else [list(range(a, b)) for a, b in groups]
    advantages = [0.0] * len(values)
    for group in members:
        group_values = torch.tensor([float(values[i]) for i in group])
        for i, a in zip(group, group_advantages(group_values, mode, normalize).tolist(), strict=True):
            advantages[i] = a
    return per_agent_normalized(advantages, per_agent_normalization)


def per_agent_normalized(advantages: list[float], per_agent_normalization: bool) -> list[float]:
    """``advantages`` z-scored once more over all of one agent's samples when ``per_agent_normalization``
    is set (agents whose returns live on different scales get comparable steps), else as they are."""
    if per_agent_normalization:
        return normalize_batch(torch.tensor(advantages, dtype=torch.float64)).tolist()
    return advantages


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


# -- counterfactual credit (see the module docstring) ---------------------------------------------


def replaced(joint: JointAction, agent: int, sample: int) -> JointAction:
    """``joint`` with agent ``agent``'s sample index set to ``sample``."""
    return joint[:agent] + (sample,) + joint[agent + 1:]


def counterfactual_joints(joint_actions: Sequence[JointAction], num_generations: int) -> list[JointAction]:
    """The joint actions the estimator needs that are not among ``joint_actions`` (so need an extra
    reward call each), in a fixed order: for each taken joint action, each agent, each other sample.
    In ``aligned`` mode that is K (K - 1) for two agents (each off-diagonal pair serves both) and
    N K (K - 1) for N > 2; in ``cross`` mode none."""
    taken = set(joint_actions)
    needed: list[JointAction] = []
    seen: set[JointAction] = set()
    for joint in joint_actions:
        for agent in range(len(joint)):
            for k in range(num_generations):
                other = replaced(joint, agent, k)
                if other not in taken and other not in seen:
                    seen.add(other)
                    needed.append(other)
    return needed


def joint_values(joint_actions: Sequence[JointAction], returns: Sequence[float], rewards: Sequence[float],
                 extra_rewards: Mapping[JointAction, float]) -> dict[JointAction, float]:
    """Q of every joint action the estimator may read: a taken one's return; a replaced one's reward
    plus the node's mean continuation ``mean_j (R_j - r_j)`` (0 on a last turn)."""
    continuation = sum(float(r) - float(x) for r, x in zip(returns, rewards, strict=True)) / len(returns)
    values = {tuple(j): float(r) for j, r in zip(joint_actions, returns, strict=True)}
    for joint, reward in extra_rewards.items():
        values.setdefault(tuple(joint), float(reward) + continuation)
    return values


def counterfactual_advantage(values: Sequence[float], own: int, mode: str) -> float:
    """Advantage of sample ``own`` against the agent's other samples, partners held fixed: ``values[k]``
    is Q with the agent's sample k. ``mean`` and ``rloo``: less the mean of the others (leave-one-out);
    ``max``: less the largest of all K (ReMax's baseline). ``raw`` has no baseline to replace."""
    if len(values) < 2:
        raise ValueError("counterfactual credit needs at least 2 samples per agent (num_generations >= 2)")
    if mode in ("mean", "rloo"):
        others = [v for k, v in enumerate(values) if k != own]
        return float(values[own]) - sum(others) / len(others)
    if mode == "max":
        return float(values[own]) - max(values)
    raise ValueError(f"counterfactual credit takes advantage_mode mean, rloo or max; got {mode!r}")


def counterfactual_advantages(values: Mapping[JointAction, float], joint_actions: Sequence[JointAction], agent: int,
                              num_generations: int, mode: str,
                              penalties: Sequence[float] | None = None) -> list[float]:
    """Agent ``agent``'s advantage for each of its K samples at a node: the counterfactual advantage
    of every taken joint action that uses the sample, averaged over them (one in ``aligned`` mode,
    K^(N-1) in ``cross``). ``penalties[k]`` (the KL penalty of the agent's own sample k) is
    subtracted from Q wherever the agent's sample is k, since replacing the sample replaces it too."""
    totals = [0.0] * num_generations
    counts = [0] * num_generations
    for joint in joint_actions:
        joint = tuple(joint)
        row = []
        for k in range(num_generations):
            other = replaced(joint, agent, k)
            if other not in values:
                raise ValueError(f"counterfactual credit: joint action {other} has no reward; it is scored while "
                                 "the tree grows (credit_assignment='counterfactual')")
            row.append(values[other] - (penalties[k] if penalties is not None else 0.0))
        own = joint[agent]
        totals[own] += counterfactual_advantage(row, own, mode)
        counts[own] += 1
    missing = [k for k, c in enumerate(counts) if c == 0]
    if missing:
        raise ValueError(f"agent {agent}'s samples {missing} appear in no joint action")
    return [t / c for t, c in zip(totals, counts, strict=True)]


def removal_joint(completions: Sequence[str], agent: int) -> list[str]:
    """The joint action's completions with agent ``agent``'s reply left empty."""
    return [("" if i == agent else text) for i, text in enumerate(completions)]


def removal_credit(team_reward: float, rewards_without: Sequence[float]) -> list[float]:
    """Each agent's credit for one joint action: the team reward less the reward with that agent's
    reply left empty (``rewards_without[i]``)."""
    return [float(team_reward) - float(r) for r in rewards_without]
