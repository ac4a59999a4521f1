"""The rollout tree's data: nodes, each agent's samples at a node, and a whole rollout.

A node is one history (dataset item + earlier turns). At a node every agent has K samples
(``num_generations``, a builder's setting: the config's, or evaluation's samples per item); the
joint actions combine them (aligned: sample j of every agent; cross: every combination). Each
joint action gets one team reward, and on a non-final turn it may have a child node whose prompts
the external transition built from that branch's own histories.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from typing import Any


@dataclass
class AgentSamples:
    """One agent's K samples at a node (prompts differ per sample only with sequential turns)."""

    prompts: list[str]
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]  # trimmed: up to and including the first EOS
    texts: list[str]
    values: list[float] = field(default_factory=list)  # returns marginalised over partners
    advantages: list[float] = field(default_factory=list)
    ref_kl: list[float] | None = None  # k3 KL to the reference model per sample
    sampled_logps: list[Any] | None = None  # per sample (T,) token log-probs kept by the sampler

    @property
    def num_generations(self) -> int:
        return len(self.texts)


@dataclass
class Node:
    """One history of one dataset item at one turn, with every agent's samples and the rewards."""

    node_id: int
    item_index: int
    item: dict[str, Any]
    turn: int  # 0-based
    parent: Node | None
    parent_joint: int | None
    prompt_values: list[Any]  # per agent: the formatter's result (text or chat messages), before peers
    prompt_history: list[list[str]]  # per agent: prompts of earlier turns (this one is added on generation)
    response_history: list[list[str]]  # per agent: completions of earlier turns on this branch
    agents: list[AgentSamples] = field(default_factory=list)
    joint_actions: list[tuple[int, ...]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    reward_terms: dict[str, list[float]] = field(default_factory=dict)
    children: dict[int, Node] = field(default_factory=dict)
    returns: list[float] = field(default_factory=list)
    # credit_assignment='counterfactual': the team reward of joint actions that replace one agent's sample
    counterfactual_rewards: dict[tuple[int, ...], float] = field(default_factory=dict)
    credit: dict[int, list[float]] = field(default_factory=dict)  # joint action -> each agent's measured credit

    def joint_completions(self, j: int) -> list[str]:
        """Every agent's completion in joint action ``j``."""
        return [self.agents[i].texts[k] for i, k in enumerate(self.joint_actions[j])]

    def joint_prompts(self, j: int) -> list[str]:
        return [self.agents[i].prompts[k] for i, k in enumerate(self.joint_actions[j])]


@dataclass
class Rollout:
    """The trees grown from a batch of dataset items in one rollout."""

    roots: list[Node]
    nodes: list[Node]  # every node, level by level
    env_steps: int  # joint-action reward evaluations
    num_tokens: int  # generated completion tokens (all agents)
    timings: dict[str, float] = field(default_factory=dict)
    credit_reward_calls: int = 0  # reward evaluations of counterfactual joint actions (not in env_steps)

    def nodes_at_turn(self, turn: int) -> list[Node]:
        return [n for n in self.nodes if n.turn == turn]

    @property
    def num_turns(self) -> int:
        return 1 + max((n.turn for n in self.nodes), default=-1)


def joint_action_indices(mode: str, num_agents: int, num_generations: int) -> list[tuple[int, ...]]:
    """Joint actions as tuples of per-agent sample indices.

    ``aligned``: ``(j, j, ..., j)`` for j < K; ``cross``: the Cartesian product (K^N tuples, the
    last agent varying fastest). One agent is the same in both modes.
    """
    if mode == "cross" and num_agents > 1:
        return list(product(range(num_generations), repeat=num_agents))
    return [(j,) * num_agents for j in range(num_generations)]


def nodes_per_item(mode: str, num_agents: int, num_generations: int, num_turns: int) -> int:
    """Nodes of a full tree (no early termination): ``sum_t J^t`` with J joint actions per node."""
    j = len(joint_action_indices(mode, num_agents, num_generations))
    return sum(j**t for t in range(num_turns))
