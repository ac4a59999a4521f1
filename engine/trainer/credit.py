"""Returns and advantages over scored rollouts (tree-level glue around :mod:`advantages`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.trainer.advantages import group_advantages, marginal_returns, node_returns, normalize_batch
from engine.trainer.tree import Node, Rollout


def assign_returns(rollout: Rollout, discount: float) -> None:
    """Post-order: each node's joint-action returns from its rewards and its children's returns."""
    for node in sorted(rollout.nodes, key=lambda n: n.turn, reverse=True):
        child = [node.children[j].returns if j in node.children else None for j in range(len(node.rewards))]
        node.returns = node_returns(node.rewards, child, discount)


def assign_advantages(
    rollouts: Sequence[Rollout],
    *,
    mode: str,
    normalize: bool,
    per_agent_normalization: bool,
    kl_in_reward_coef: float = 0.0,
) -> None:
    """Each agent's per-sample values (returns marginalised over partners, minus the KL penalty
    when KL is in the reward) and group-relative advantages among the node's siblings.

    With ``per_agent_normalization`` an agent's advantages are z-scored once more over all its
    samples in the update, so agents whose returns live on different scales get comparable steps.
    """
    nodes: list[Node] = [n for r in rollouts for n in r.nodes]
    if not nodes:
        return
    num_agents = len(nodes[0].agents)
    for node in nodes:
        for i, samples in enumerate(node.agents):
            values = marginal_returns(node.returns, node.joint_actions, i, samples.num_samples)
            if kl_in_reward_coef and samples.ref_kl is not None:
                values = [v - kl_in_reward_coef * kl for v, kl in zip(values, samples.ref_kl, strict=True)]
            samples.values = values
            samples.advantages = group_advantages(torch.tensor(values), mode, normalize).tolist()
    if per_agent_normalization:
        for i in range(num_agents):
            flat = torch.tensor([a for n in nodes for a in n.agents[i].advantages], dtype=torch.float64)
            flat = normalize_batch(flat).tolist()
            pos = 0
            for node in nodes:
                k = node.agents[i].num_samples
                node.agents[i].advantages = flat[pos:pos + k]
                pos += k
