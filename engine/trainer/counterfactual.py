"""Counterfactual credit, at one node of the rollout tree (``credit_assignment="counterfactual"``).

With one team reward, agent i's group-relative advantage also carries its partners' luck: its good
sample, drawn next to a partner's bad one, is punished. The counterfactual estimator (a difference
reward, leave-one-out over the agent's own samples) compares the joint action that was taken with the
same joint action where only agent i's sample is replaced by each of its other K - 1 samples,
partners held fixed::

    A_i(j) = Q(j) - mean_{k' != j_i} Q(j with agent i's sample replaced by k')

The replaced joint actions need extra reward calls, never extra generation (the tree builder scores
them, :meth:`engine.trainer.rollout.TreeBuilder.score_counterfactuals`). In ``cross`` mode every
combination is a joint action already (no extra call), and the estimator equals the leave-one-out
baseline on the partner-marginalised returns. A replaced joint action has no child node, so on a
non-final turn its value is its immediate reward plus the mean continuation (return less reward)
of the node's joint actions.

All functions are pure (lists in, lists out) so they can be checked by hand; the step applies them
node by node in :func:`engine.trainer.magrpo.counterfactual_batch_advantages`. The group-relative
baselines every other ``credit_assignment`` uses are in :mod:`engine.trainer.magrpo`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

JointAction = tuple[int, ...]


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
