"""Returns and advantages over scored rollouts.

Returns are computed on the tree (a node's return needs its children's). For the update, each
agent's part is then laid out flat (:class:`AgentBatch`): its S samples over every node of every
rollout, the sibling groups they form, their returns marginalised over partners, and later their
KL to the reference and their advantages, all as length-S lists. The arithmetic lives in pure
functions of :mod:`engine.trainer.advantages`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.trainer.advantages import group_advantages, marginal_returns, node_returns, normalize_batch
from engine.trainer.tree import Rollout
from engine.trainer.update import TrainSample, sample_kl


def assign_returns(rollout: Rollout, discount: float) -> None:
    """Post-order: each node's joint-action returns from its rewards and its children's returns."""
    for node in sorted(rollout.nodes, key=lambda n: n.turn, reverse=True):
        child = [node.children[j].returns if j in node.children else None for j in range(len(node.rewards))]
        node.returns = node_returns(node.rewards, child, discount)


def credit_rollout(rollout: Rollout, rewards: Sequence[Sequence[float]],
                   terms: Mapping[str, Sequence[float]] | Sequence[Mapping[str, Sequence[float]]] | None) -> None:
    """Rewards from outside for an unscored single-turn rollout: ``rewards[n][j]`` for item n's joint
    action j, ``terms`` per-term values of the same shape (one mapping per item, or one for all)."""
    if any(node.turn > 0 for node in rollout.nodes):
        raise ValueError("credit() takes single-turn rollouts; multi-turn rollouts are scored while they grow")
    if len(rewards) != len(rollout.roots):
        raise ValueError(f"credit(): got rewards for {len(rewards)} items, the rollout has {len(rollout.roots)}")
    for n, (root, values) in enumerate(zip(rollout.roots, rewards, strict=True)):
        if len(values) != len(root.joint_actions):
            raise ValueError(f"credit(): item {n} has {len(root.joint_actions)} joint actions, got "
                             f"{len(values)} rewards")
        root.rewards = [float(v) for v in values]
        node_terms = terms[n] if isinstance(terms, Sequence) else terms
        root.reward_terms = {k: [float(x) for x in v] for k, v in (node_terms or {}).items()}


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
            groups.append((len(samples), len(samples) + s.num_generations))
            returns += marginal_returns(node.returns, node.joint_actions, agent, s.num_generations)
            for k in range(s.num_generations):
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


def fill_advantages(batch: AgentBatch, rollouts: Sequence[Rollout], config: Any) -> None:
    """An agent's advantages from its scored batch: the KL to the reference when it is measured, each
    sample's value (less the KL penalty when it is in the reward) and the group-relative advantages,
    set on the samples the loss reads and recorded on the tree (:func:`record_on_tree`)."""
    in_reward = config.reference_kl_enabled and config.reference_kl_mode == "reward"
    kl_coef = config.reference_kl_coef if in_reward else 0.0
    batch.kl = sample_kl(batch.samples) if config.reference_kl_enabled else None  # (S,)
    batch.values = sample_values(batch.returns, batch.kl, kl_coef)  # (S,)
    batch.advantages = batch_advantages(batch.values, batch.groups, mode=config.advantage_mode,  # (S,)
                                        normalize=config.advantage_normalization,
                                        per_agent_normalization=config.per_agent_normalization)
    for sample, advantage in zip(batch.samples, batch.advantages, strict=True):
        sample.advantage = float(advantage)
    record_on_tree(batch, rollouts)  # the transcripts show each sample's advantage and KL


def record_on_tree(batch: AgentBatch, rollouts: Sequence[Rollout]) -> None:
    """Write each sample's value, advantage and KL back onto its node (transcripts show them)."""
    nodes = [node for rollout in rollouts for node in rollout.nodes]
    for node, (start, end) in zip(nodes, batch.groups, strict=True):
        s = node.agents[batch.agent]
        s.values = batch.values[start:end]
        s.advantages = batch.advantages[start:end]
        if batch.kl is not None:
            s.ref_kl = batch.kl[start:end]
