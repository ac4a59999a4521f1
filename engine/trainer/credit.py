"""Returns and advantages over scored rollouts.

Returns are computed on the tree (a node's return needs its children's). For the update, each
agent's part is then laid out flat (:class:`AgentBatch`): its S samples over every node of every
rollout, the sibling groups they form, their returns marginalised over partners, and later their
KL to the reference and their advantages, all as length-S lists. The arithmetic lives in pure
functions of :mod:`engine.trainer.advantages` and :mod:`engine.trainer.counterfactual`.

``credit_assignment`` chooses each advantage's baseline: ``group`` the node's sibling samples
(MAGRPO), ``turn_group`` every sample the agent wrote at that turn of the item's tree (AT-GRPO's
agent x turn groups), ``counterfactual`` the joint action with the agent's sample replaced by its
other samples, partners held fixed (a difference reward).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.trainer.advantages import (
    group_advantages,
    marginal_returns,
    node_returns,
    normalize_batch,
    pooled_groups,
)
from engine.trainer.counterfactual import counterfactual_advantages, joint_values
from engine.trainer.tree import Node, Rollout
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
    nodes: list[Node] = field(default_factory=list)  # the node of each sibling group
    pools: list[tuple[int, int, int]] = field(default_factory=list)  # each group's (rollout, root node, turn)
    kl: list[float] | None = None  # (S,) k3 KL to the reference model, when it is scored
    values: list[float] = field(default_factory=list)  # (S,) returns, less the KL penalty when in the reward
    advantages: list[float] = field(default_factory=list)  # (S,)


def agent_batch(agent: int, rollouts: Sequence[Rollout]) -> AgentBatch:
    """Agent ``agent``'s samples in rollout/node order with their sibling groups and returns."""
    samples: list[TrainSample] = []
    groups: list[tuple[int, int]] = []
    returns: list[float] = []
    nodes: list[Node] = []
    pools: list[tuple[int, int, int]] = []
    for r_idx, rollout in enumerate(rollouts):
        for node in rollout.nodes:
            s = node.agents[agent]
            groups.append((len(samples), len(samples) + s.num_generations))
            nodes.append(node)
            pools.append((r_idx, root_of(node).node_id, node.turn))
            returns += marginal_returns(node.returns, node.joint_actions, agent, s.num_generations)
            for k in range(s.num_generations):
                sampled = s.sampled_logps[k] if s.sampled_logps is not None else None
                samples.append(TrainSample((r_idx, node.node_id), node.turn, s.prompt_ids[k], s.completion_ids[k],
                                           old_logps=sampled, sampler_logps=sampled))
    return AgentBatch(agent, samples, groups, returns, nodes, pools)


def root_of(node: Node) -> Node:
    """The turn-0 node of ``node``'s tree."""
    while node.parent is not None:
        node = node.parent
    return node


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
    return _per_agent(advantages, per_agent_normalization)


def counterfactual_batch_advantages(batch: AgentBatch, kl_coef: float, *, mode: str, normalize: bool,
                                    per_agent_normalization: bool) -> list[float]:
    """Counterfactual advantages of one agent's samples, node by node
    (:func:`engine.trainer.counterfactual.counterfactual_advantages`), z-scored within each node's
    siblings with ``normalize`` and over the agent's samples with ``per_agent_normalization``."""
    advantages: list[float] = []
    for node, (start, end) in zip(batch.nodes, batch.groups, strict=True):
        if not node.counterfactual_rewards and len(node.joint_actions) < (end - start) ** len(node.agents):
            raise ValueError("credit_assignment='counterfactual' needs the team reward of each agent's replaced "
                             "samples, scored while the tree grows; a rollout credited from outside "
                             "(credit()) has none. Use credit_assignment='group' with a coordinator's rewards")
        values = joint_values(node.joint_actions, node.returns, node.rewards, node.counterfactual_rewards)
        penalties = [kl_coef * d for d in batch.kl[start:end]] if kl_coef and batch.kl is not None else None
        node_adv = counterfactual_advantages(values, node.joint_actions, batch.agent, end - start, mode, penalties)
        if normalize and len(node_adv) > 1:
            node_adv = normalize_batch(torch.tensor(node_adv, dtype=torch.float64)).tolist()
        advantages += node_adv
    return _per_agent(advantages, per_agent_normalization)


def _per_agent(advantages: list[float], per_agent_normalization: bool) -> list[float]:
    if per_agent_normalization:
        return normalize_batch(torch.tensor(advantages, dtype=torch.float64)).tolist()
    return advantages


def fill_advantages(batch: AgentBatch, rollouts: Sequence[Rollout], config: Any) -> None:
    """An agent's advantages from its scored batch: the KL to the reference when it is measured, each
    sample's value (less the KL penalty when it is in the reward) and the group-relative advantages,
    set on the samples the loss reads and recorded on the tree (:func:`record_on_tree`)."""
    in_reward = config.reference_kl_enabled and config.reference_kl_mode == "reward"
    kl_coef = config.reference_kl_coef if in_reward else 0.0
    batch.kl = sample_kl(batch.samples) if config.reference_kl_enabled else None  # (S,)
    batch.values = sample_values(batch.returns, batch.kl, kl_coef)  # (S,)
    estimator = getattr(config, "credit_assignment", "group")
    settings = {"mode": config.advantage_mode, "normalize": config.advantage_normalization,
                "per_agent_normalization": config.per_agent_normalization}
    if estimator == "counterfactual":
        batch.advantages = counterfactual_batch_advantages(batch, kl_coef, **settings)  # (S,)
    else:
        pools = batch.pools if estimator == "turn_group" else None
        batch.advantages = batch_advantages(batch.values, batch.groups, pools=pools, **settings)  # (S,)
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
