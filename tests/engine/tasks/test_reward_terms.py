"""Reward terms: weighted totals, per-term values, CoMLRL calling, and errors naming task and term."""

from __future__ import annotations

import math

import pytest

from engine.tasks import RewardError, RewardGroup, RewardTerm, RewardTerms, TaskError


def length_term(agent_completions, batch_items, prompts):
    return [float(len(a) + len(b)) for a, b in zip(*agent_completions, strict=True)]


def match_term(agent_completions, batch_items, prompts):
    return [1.0 if a == item["target"] else 0.0 for a, item in zip(agent_completions[0], batch_items, strict=True)]


def make_reward() -> RewardTerms:
    return RewardTerms(task="demo", terms=[RewardTerm("length", length_term, 0.5), RewardTerm("match", match_term, 2.0)])


def test_score_returns_weighted_totals_and_raw_terms():
    reward = make_reward()
    totals, terms = reward.score([["ab", "x"], ["c", "yz"]], [{"target": "ab"}, {"target": "ab"}], None)
    # joint 0: length 3 * 0.5 + match 1 * 2 = 3.5; joint 1: length 3 * 0.5 + 0 = 1.5
    assert totals == [3.5, 1.5]
    assert terms == {"length": [3.0, 3.0], "match": [1.0, 0.0]}
    assert reward.term_names == ["length", "match"]
    assert reward.weights == {"length": 0.5, "match": 2.0}


def test_comlrl_call_returns_totals_and_broadcasts_one_item():
    reward = make_reward()
    assert reward(["ab"], ["c"], batch_items=[{"target": "ab"}]) == [3.5]
    assert reward([["ab", "q"], ["c", "d"]], batch_items=[{"target": "q"}]) == [1.5, 3.0]
    assert reward.batched is True


def test_group_terms_share_one_computation():
    calls = []

    def both(agent_completions, batch_items, prompts):
        calls.append(1)
        return {"a": [1.0] * len(agent_completions[0]), "b": [2.0] * len(agent_completions[0])}

    reward = RewardTerms(task="demo", terms=[RewardGroup(both, {"a": 1.0, "b": -1.0})])
    totals, terms = reward.score([["x", "y"]], [{}], None)
    assert totals == [-1.0, -1.0] and terms["b"] == [2.0, 2.0] and len(calls) == 1


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (lambda c, i, p: [1.0], "returned 1 value(s) for 2 joint action(s)"),
        (lambda c, i, p: [1.0, math.nan], "value 1 is nan"),
        (lambda c, i, p: [1.0, math.inf], "value 1 is inf"),
        (lambda c, i, p: [1.0, "x"], "value 1 is 'x', not a number"),
        (lambda c, i, p: {"a": 1}, "returned dict"),
    ],
)
def test_bad_term_output_names_task_and_term(bad, message):
    reward = RewardTerms(task="mytask", terms=[RewardTerm("ok", length_term), RewardTerm("broken", bad)])
    with pytest.raises(RewardError) as info:
        reward.score([["a", "b"], ["c", "d"]], [{}, {}], None)
    assert "task 'mytask'" in str(info.value) and "reward 'broken'" in str(info.value)
    assert message in str(info.value)


def test_group_missing_term_is_reported():
    reward = RewardTerms(task="t", terms=[RewardGroup(lambda c, i, p: {"a": [1.0]}, {"a": 1.0, "b": 1.0}, label="g")])
    with pytest.raises(RewardError, match=r"reward 'g': missing terms \['b'\]"):
        reward.score([["x"]], [{}], None)


def test_configuration_errors():
    with pytest.raises(TaskError, match="at least one term"):
        RewardTerms(task="t", terms=[])
    with pytest.raises(TaskError, match="defined twice"):
        RewardTerms(task="t", terms=[RewardTerm("a", length_term), RewardTerm("a", match_term)])
    with pytest.raises(RewardError, match="agent 1 has 1 completions but agent 0 has 2"):
        make_reward().score([["a", "b"], ["c"]], [{}], None)


def test_engine_team_reward_logs_every_term():
    """The engine's reward adapter accepts the object and reports each term separately."""
    from engine.rewards.team_reward import TeamReward

    team = TeamReward(make_reward())
    assert team.term_names == ["length", "match"]
    totals, terms = team.score([["ab", "x"], ["c", "yz"]], [{"target": "ab"}, {"target": "x"}], [["p", "p"], ["q", "q"]])
    assert totals == [3.5, 3.5]
    assert terms["match"] == [1.0, 1.0]
