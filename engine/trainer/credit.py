"""Returns and advantages over scored rollouts.

Returns are computed on the tree (a node's return needs its children's). For the update, each
agent's part is then laid out flat (:class:`AgentBatch`): its S samples over every node of every
rollout, the sibling groups they form, their returns marginalised over partners, and later their
KL to the reference and their advantages, all as length-S lists. The arithmetic lives in pure
functions of :mod:`engine.trainer.advantages`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from engine.trainer.advantages import group_advantages, marginal_returns, node_returns, normalize_batch
from engine.trainer.tree import Rollout
from engine.trainer.update import TrainSample


def assign_returns(rollout: Rollout, discount: float) -> None:
    """Post-order: each node's joint-action returns from its rewards and its children's returns."""
    for node in sorted(rollout.nodes, key=lambda n: n.turn, reverse=True):
        child = [node.children[j].returns if j in node.children else None for j in range(len(node.rewards))]
        node.returns = node_returns(node.rewards, child, discount)


@dataclass
class AgentBatch:
    """One agent's part of an update, flat over every node of every rollout (S samples)."""

    agent: int
    samples: list[TrainSample]  # (S,) the sequences the loss reads
    groups: list[tuple[int, int]]  # sibling groups: samples[start:end] were drawn at one node
    returns: list[float]  # (S,) returns marginalised over partners
    kl: list[float] | None = None  # (S,) k3 KL to the reference model, when it is scored
    values: list[float] = field(default_factory=list)  # (S,) returns, less the KL penalty when in the reward
    advantages: list[float] = field(default_factory=list)  # (S,)


def agent_batch(agent: int, rollouts: Sequence[Rollout]) -> AgentBatch:
    """Agent ``agent``'s samples in rollout/node order with their sibling groups and returns."""
    samples: list[TrainSample] = []
    groups: list[tuple[int, int]] = []
    returns: list[float] = []
    for r_idx, rollout in enumerate(rollouts):
        for node in rollout.nodes:
            s = node.agents[agent]
            groups.append((len(samples), len(samples) + s.num_samples))
            returns += marginal_returns(node.returns, node.joint_actions, agent, s.num_samples)
            for k in range(s.num_samples):
                samples.append(TrainSample((r_idx, node.node_id), node.turn, s.prompt_ids[k], s.completion_ids[k],
                                           old_logps=s.sampled_logps[k] if s.sampled_logps is not None else None))
    return AgentBatch(agent, samples, groups, returns)


def sample_values(returns: Sequence[float], kl: Sequence[float] | None, kl_in_reward_coef: float) -> list[float]:
    """Each sample's value: its return, less ``kl_in_reward_coef * kl`` when the KL is in the reward."""
    if not kl_in_reward_coef or kl is None:
        return list(returns)
    return [v - kl_in_reward_coef * d for v, d in zip(returns, kl, strict=True)]


def batch_advantages(values: Sequence[float], groups: Sequence[tuple[int, int]], *, mode: str, normalize: bool,
                     per_agent_normalization: bool) -> list[float]:
    """Group-relative advantages of one agent's samples (pure function): the baseline is taken among
    the siblings of each group; with ``per_agent_normalization`` the agent's advantages are z-scored
    once more over all its samples, so agents whose returns live on different scales get comparable
    steps."""
    advantages: list[float] = []
    for start, end in groups:
        advantages += group_advantages(torch.tensor(list(values[start:end])), mode, normalize).tolist()
    if per_agent_normalization:
        advantages = normalize_batch(torch.tensor(advantages, dtype=torch.float64)).tolist()
    return advantages


def record_on_tree(batch: AgentBatch, rollouts: Sequence[Rollout]) -> None:
    """Write each sample's value, advantage and KL back onto its node (transcripts show them)."""
    nodes = [node for rollout in rollouts for node in rollout.nodes]
    for node, (start, end) in zip(nodes, batch.groups, strict=True):
        s = node.agents[batch.agent]
        s.values = batch.values[start:end]
        s.advantages = batch.advantages[start:end]
        if batch.kl is not None:
            s.ref_kl = batch.kl[start:end]
