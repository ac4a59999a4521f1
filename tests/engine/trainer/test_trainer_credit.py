"""Returns and advantages on a hand-built two-turn tree (no models): discounting through children,
cross-mode marginalisation, KL in the reward and per-agent normalisation, computed flat per agent."""

from __future__ import annotations

import math

import pytest

from engine.trainer.magrpo import agent_batch, batch_advantages, record_on_tree, sample_values
from engine.trainer.rollout import AgentSamples, Node, Rollout, assign_returns, joint_action_indices


def _samples(k: int) -> AgentSamples:
    return AgentSamples(prompts=["p"] * k, prompt_ids=[[1]] * k, completion_ids=[[2]] * k, texts=["t"] * k)


def _node(node_id: int, turn: int, rewards: list[float], mode: str = "aligned", parent=None, joint=None) -> Node:
    node = Node(node_id=node_id, item_index=0, item={}, turn=turn, parent=parent, parent_joint=joint,
                prompt_values=["p", "p"], prompt_history=[[], []], response_history=[[], []])
    node.agents = [_samples(2), _samples(2)]
    node.joint_actions = joint_action_indices(mode, 2, 2)
    node.rewards = rewards
    return node


def assign_advantages(rollouts, *, mode, normalize, per_agent_normalization, kl_in_reward_coef=0.0, kl=None):
    """Every agent's flat batch, its values and advantages, recorded on the tree as the trainer does."""
    batches = []
    for agent in range(len(rollouts[0].nodes[0].agents)):
        batch = agent_batch(agent, rollouts)
        batch.kl = None if kl is None else kl[agent]
        batch.values = sample_values(batch.returns, batch.kl, kl_in_reward_coef)
        batch.advantages = batch_advantages(batch.values, batch.groups, mode=mode, normalize=normalize,
                                            per_agent_normalization=per_agent_normalization)
        record_on_tree(batch, rollouts)
        batches.append(batch)
    return batches


def test_two_turn_aligned_tree() -> None:
    root = _node(0, 0, [1.0, 0.0])
    child0 = _node(1, 1, [2.0, 4.0], parent=root, joint=0)
    child1 = _node(2, 1, [0.0, 0.0], parent=root, joint=1)
    root.children = {0: child0, 1: child1}
    rollout = Rollout(roots=[root], nodes=[root, child0, child1], env_steps=6, num_tokens=0)
    assign_returns(rollout, discount=0.5)
    assert child0.returns == [2.0, 4.0]
    assert root.returns == [1.0 + 0.5 * 3.0, 0.0]
    assign_advantages([rollout], mode="mean", normalize=False, per_agent_normalization=False)
    assert root.agents[0].advantages == [1.25, -1.25] == root.agents[1].advantages
    assert child0.agents[1].advantages == [-1.0, 1.0]
    assert child1.agents[0].advantages == [0.0, 0.0]


def test_cross_node_marginalises_partners_by_the_mean() -> None:
    node = _node(0, 0, [1.0, 3.0, 5.0, 7.0], mode="cross")
    rollout = Rollout(roots=[node], nodes=[node], env_steps=4, num_tokens=0)
    assign_returns(rollout, discount=1.0)
    assign_advantages([rollout], mode="raw", normalize=False, per_agent_normalization=False)
    assert node.agents[0].values == [2.0, 6.0] and node.agents[0].advantages == [2.0, 6.0]
    assert node.agents[1].values == [3.0, 5.0]


def test_kl_in_reward_and_per_agent_normalisation() -> None:
    a = _node(0, 0, [1.0, 2.0])
    b = _node(1, 0, [0.0, 10.0])
    kl = [[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]  # per agent, flat over the nodes a and b
    rollouts = [Rollout(roots=[n], nodes=[n], env_steps=2, num_tokens=0) for n in (a, b)]
    for r in rollouts:
        assign_returns(r, discount=1.0)
    batches = assign_advantages(rollouts, mode="mean", normalize=False, per_agent_normalization=False,
                                kl_in_reward_coef=0.5, kl=kl)
    assert batches[0].groups == [(0, 2), (2, 4)] and batches[0].returns == [1.0, 2.0, 0.0, 10.0]
    assert a.agents[0].ref_kl == [1.0, 0.0]  # recorded for the transcripts
    assert a.agents[0].values == [0.5, 2.0] and a.agents[0].advantages == [-0.75, 0.75]
    assert a.agents[1].advantages == [-0.5, 0.5] and b.agents[1].advantages == [-5.0, 5.0]
    assign_advantages(rollouts, mode="mean", normalize=False, per_agent_normalization=True)
    # agent 1 over both nodes: [-0.5, 0.5, -5, 5] has mean 0 and population std sqrt(12.625)
    s = math.sqrt((0.25 + 0.25 + 25 + 25) / 4)
    assert a.agents[1].advantages + b.agents[1].advantages == pytest.approx([-0.5 / s, 0.5 / s, -5 / s, 5 / s])
