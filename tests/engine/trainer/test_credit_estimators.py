"""Credit estimators against hand-computed advantages (no models): counterfactual joint actions and
values, leave-one-out over an agent's own samples with partners held fixed, aligned and cross,
turn groups on a two-turn tree, the KL penalty inside the counterfactual, and removal credit."""

from __future__ import annotations

import pytest

from engine.rewards.team_reward import TeamReward
from engine.trainer.counterfactual import (
    counterfactual_advantage,
    counterfactual_advantages,
    counterfactual_joints,
    joint_values,
)
from engine.trainer.magrpo import (
    agent_batch,
    batch_advantages,
    counterfactual_batch_advantages,
    pooled_groups,
)
from engine.trainer.reporting import choose_probes, credit_metrics, measure_credit, removal_credit
from engine.trainer.rollout import AgentSamples, Node, Rollout, assign_returns, joint_action_indices

Q_A = [1.0, 0.0, 0.5]  # agent 0's part of the team reward, per sample
Q_B = [0.0, 2.0, 1.0]  # agent 1's part


def additive(joint: tuple[int, ...]) -> float:
    return Q_A[joint[0]] + Q_B[joint[1]]


def table(joints, reward) -> dict[tuple[int, ...], float]:
    return {tuple(j): reward(j) for j in joints}


def test_aligned_needs_every_off_diagonal_pair_once_and_cross_needs_none() -> None:
    aligned = joint_action_indices("aligned", 2, 3)
    assert counterfactual_joints(aligned, 3) == [(1, 0), (2, 0), (0, 1), (0, 2), (2, 1), (1, 2)]
    assert counterfactual_joints(joint_action_indices("cross", 2, 3), 3) == []
    assert len(counterfactual_joints(joint_action_indices("aligned", 3, 2), 2)) == 3 * 2 * 1  # N K (K-1)


def test_counterfactual_separates_a_good_agent_from_a_bad_partner_where_group_does_not() -> None:
    aligned = joint_action_indices("aligned", 2, 3)
    values = table(aligned + counterfactual_joints(aligned, 3), additive)
    # agent 0, sample k: q_A[k] - mean of its other q_A; 1 - 0.25, 0 - 0.75, 0.5 - 0.5
    assert counterfactual_advantages(values, aligned, 0, 3, "mean") == pytest.approx([0.75, -0.75, 0.0])
    assert counterfactual_advantages(values, aligned, 1, 3, "mean") == pytest.approx([-1.5, 1.5, 0.0])
    # group (mean baseline) on the team returns [1, 2, 1.5]: agent 0's best sample is punished
    group = batch_advantages([1.0, 2.0, 1.5], [(0, 3)], mode="mean", normalize=False, per_agent_normalization=False)
    assert group == pytest.approx([-0.5, 0.5, 0.0])


def test_an_agent_whose_action_does_not_change_the_reward_gets_zero() -> None:
    aligned = joint_action_indices("aligned", 2, 3)
    values = table(aligned + counterfactual_joints(aligned, 3), lambda j: Q_B[j[1]])
    assert counterfactual_advantages(values, aligned, 0, 3, "mean") == [0.0, 0.0, 0.0]
    assert counterfactual_advantages(values, aligned, 1, 3, "rloo") == pytest.approx([-1.5, 1.5, 0.0])


def test_cross_mode_equals_leave_one_out_on_the_marginal_returns() -> None:
    cross = joint_action_indices("cross", 2, 3)
    values = table(cross, lambda j: float(j[0] * j[1]))  # not additive: marginals of agent 0 are [0, 1, 2]
    # leave-one-out: 0 - (1 + 2) / 2, 1 - (0 + 2) / 2, 2 - (0 + 1) / 2
    assert counterfactual_advantages(values, cross, 0, 3, "mean") == pytest.approx([-1.5, 0.0, 1.5])


def test_max_baseline_and_raw_refused() -> None:
    assert counterfactual_advantage([1.0, 3.0, 2.0], 0, "max") == -2.0
    assert counterfactual_advantage([1.0, 3.0, 2.0], 1, "rloo") == 1.5
    with pytest.raises(ValueError, match="mean, rloo or max"):
        counterfactual_advantage([1.0, 2.0], 0, "raw")
    with pytest.raises(ValueError, match="num_generations >= 2"):
        counterfactual_advantage([1.0], 0, "mean")


def test_a_replaced_joint_action_on_a_non_final_turn_gets_the_mean_continuation() -> None:
    # returns 3 and 1 from rewards 1 and 0: continuations 2 and 1, mean 1.5
    values = joint_values([(0, 0), (1, 1)], [3.0, 1.0], [1.0, 0.0], {(1, 0): 0.5, (0, 0): 9.0})
    assert values == {(0, 0): 3.0, (1, 1): 1.0, (1, 0): 2.0}  # a taken joint action keeps its own return


def test_the_kl_penalty_moves_with_the_agent_s_own_sample() -> None:
    joints = [(0, 0), (1, 1)]
    values = {(0, 0): 1.0, (1, 1): 0.0, (1, 0): 0.5, (0, 1): 0.2}
    # sample 0: [Q(0,0) - 0.1, Q(1,0) - 0.3] -> 0.9 - 0.2; sample 1: [Q(0,1) - 0.1, Q(1,1) - 0.3] -> -0.3 - 0.1
    assert counterfactual_advantages(values, joints, 0, 2, "mean", [0.1, 0.3]) == pytest.approx([0.7, -0.4])


def test_a_missing_replaced_reward_is_named() -> None:
    with pytest.raises(ValueError, match=r"joint action \(1, 0\) has no reward"):
        counterfactual_advantages({(0, 0): 1.0, (1, 1): 0.0}, [(0, 0), (1, 1)], 0, 2, "mean")


def test_pooled_groups_merge_groups_with_one_key_in_first_seen_order() -> None:
    assert pooled_groups([(0, 2), (2, 4), (4, 6)], ["a", "b", "a"]) == [[0, 1, 4, 5], [2, 3]]
    with pytest.raises(ValueError, match="3 groups but 2 keys"):
        pooled_groups([(0, 2), (2, 4), (4, 6)], ["a", "b"])


def _samples(texts: list[str]) -> AgentSamples:
    k = len(texts)
    return AgentSamples(prompts=["p"] * k, prompt_ids=[[1]] * k, completion_ids=[[2]] * k, texts=texts)


def _node(node_id: int, turn: int, rewards: list[float], parent=None, joint=None, texts=("x", "y")) -> Node:
    node = Node(node_id=node_id, item_index=0, item={"i": 0}, turn=turn, parent=parent, parent_joint=joint,
                prompt_values=["p", "p"], prompt_history=[[], []], response_history=[[], []])
    node.agents = [_samples(list(texts)), _samples(list(texts))]
    node.joint_actions = joint_action_indices("aligned", 2, 2)
    node.rewards = rewards
    return node


def _two_turn_rollout() -> Rollout:
    root = _node(0, 0, [1.0, 0.0])
    child0 = _node(1, 1, [2.0, 4.0], parent=root, joint=0)
    child1 = _node(2, 1, [0.0, 0.0], parent=root, joint=1)
    root.children = {0: child0, 1: child1}
    rollout = Rollout(roots=[root], nodes=[root, child0, child1], env_steps=6, num_tokens=0)
    assign_returns(rollout, discount=1.0)
    return rollout


def test_turn_group_pools_an_agent_s_samples_over_the_nodes_of_one_turn() -> None:
    batch = agent_batch(0, [_two_turn_rollout()])
    assert batch.returns == [4.0, 0.0, 2.0, 4.0, 0.0, 0.0]  # root: 1 + mean(2, 4), 0 + mean(0, 0)
    assert batch.pools == [(0, 0, 0), (0, 0, 1), (0, 0, 1)]
    pooled = batch_advantages(batch.returns, batch.groups, pools=batch.pools, mode="mean", normalize=False,
                              per_agent_normalization=False)
    assert pooled == pytest.approx([2.0, -2.0, 0.5, 2.5, -1.5, -1.5])  # turn 2's mean is 1.5
    grouped = batch_advantages(batch.returns, batch.groups, mode="mean", normalize=False,
                               per_agent_normalization=False)
    assert grouped == pytest.approx([2.0, -2.0, -1.0, 1.0, 0.0, 0.0])


def test_counterfactual_over_a_two_turn_tree_uses_the_replaced_rewards_and_continuations() -> None:
    rollout = _two_turn_rollout()
    root, child0, child1 = rollout.nodes
    root.counterfactual_rewards = {(1, 0): 0.5, (0, 1): 1.0}
    child0.counterfactual_rewards = {(1, 0): 3.0, (0, 1): 1.0}
    child1.counterfactual_rewards = {(1, 0): 0.0, (0, 1): 1.0}
    batch = agent_batch(0, [rollout])
    advantages = counterfactual_batch_advantages(batch, 0.0, mode="mean", normalize=False,
                                                 per_agent_normalization=False)
    # root: continuations (4 - 1, 0 - 0), mean 1.5; sample 0: R(0,0) = 4 vs Q(1,0) = 0.5 + 1.5 = 2 -> 2;
    #       sample 1: R(1,1) = 0 vs Q(0,1) = 1 + 1.5 = 2.5 -> -2.5
    # child0 (last turn): sample 0: 2 - 3 = -1; sample 1: 4 - 1 = 3; child1: 0 - 0 = 0, 0 - 1 = -1
    assert advantages == pytest.approx([2.0, -2.5, -1.0, 3.0, 0.0, -1.0])


def test_counterfactual_without_replaced_rewards_is_a_clear_error() -> None:
    batch = agent_batch(0, [_two_turn_rollout()])
    with pytest.raises(ValueError, match="credited from outside"):
        counterfactual_batch_advantages(batch, 0.0, mode="mean", normalize=False, per_agent_normalization=False)


def both_good(completions1, completions2):
    return [float(completions1[0] == "good") + 2.0 * float(completions2[0] == "good")]


def test_removal_credit_scores_the_team_without_each_agent_s_reply() -> None:
    assert removal_credit(3.0, [2.0, 1.0]) == [1.0, 2.0]
    root = _node(0, 0, [3.0, 0.0], texts=("good", "bad"))
    rollout = Rollout(roots=[root], nodes=[root], env_steps=2, num_tokens=0)
    probes = choose_probes([rollout], [(root, 0)], 1, rng=None)  # the reported branch alone fills the budget
    assert probes == [(root, 0)]
    assert measure_credit(TeamReward(both_good), probes, 2) == 2
    assert root.credit == {0: [1.0, 2.0]}
    assert credit_metrics(probes, ["a", "b"]) == {"agent/a/credit": 1.0, "agent/b/credit": 2.0}
    assert choose_probes([rollout], [], 0, rng=None) == []


def test_removal_credit_cannot_separate_agents_under_a_reward_that_needs_both() -> None:
    """The cause of identical "Who contributed" bars on the quick start: its team reward is the geometric
    mean of the two parts' fits, so emptying either reply scores 0 and each agent's credit is the whole
    team reward, however different the parts (the dashboard says so beside the chart)."""
    from engine.tasks.quickstart import team_fit

    def geometric(completions1, completions2):
        return [team_fit(a, b, "abcdefghijklm", "nopqrstuvwxyz") for a, b in zip(completions1, completions2,
                                                                                  strict=True)]

    root = _node(0, 0, [0.0, 0.0])
    root.agents = [_samples(["abcz", "zzzz"]), _samples(["nopq", "aaaa"])]  # first fits 3/4, second 4/4
    root.rewards = [(0.75 * 1.0) ** 0.5, 0.0]
    assert measure_credit(TeamReward(geometric), [(root, 0)], 2) == 2
    assert root.credit[0] == pytest.approx([0.8660254, 0.8660254])  # sqrt(0.75) - 0 for both agents
