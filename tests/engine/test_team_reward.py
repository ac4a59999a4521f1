"""Reward calling conventions (CoMLRL's flexible signatures, batched functions, term objects) and
the errors for unusable rewards."""

from __future__ import annotations

import math

import pytest
import torch

from engine.rewards.team_reward import RewardError, RewardProcessors, TeamReward, call_reward_function

COMPLETIONS = [["a", "bb"], ["ccc", "dddd"]]  # agent 0 and agent 1, two joint actions
ITEMS = [{"prompt": "p", "target": 3}] * 2
PROMPTS = [["p0", "p0"], ["p1", "p1"]]


def star(*agent_completions):
    return [len(agent_completions[0][0]) + len(agent_completions[1][0])]


def two(completions1, completions2):
    return [10 * len(completions1[0]) + len(completions2[0])]


def with_prompts(prompts, c1, c2):
    return [len(prompts[0][0]) + len(c1[0])]


def all_lists(all_agent_completions):
    return [len(all_agent_completions)]


def with_items(c1, c2, batch_items=None):
    return [batch_items[0]["target"] - len(c1[0])]


def with_kwargs(c1, c2, **kwargs):
    return [len(kwargs["prompts"][1][0]) + len(kwargs["batch_items"])]


@pytest.mark.parametrize(
    ("fn", "expected"),
    [(star, [4.0, 6.0]), (two, [13.0, 24.0]), (with_prompts, [3.0, 4.0]), (all_lists, [2.0, 2.0]),
     (with_items, [2.0, 1.0]), (with_kwargs, [3.0, 3.0])],
)
def test_plain_functions_are_called_once_per_joint_action(fn, expected) -> None:
    totals, terms = TeamReward(fn).score(COMPLETIONS, ITEMS, PROMPTS)
    assert totals == expected
    assert terms == {}


def test_call_reward_function_accepts_tensors_and_scalars() -> None:
    assert call_reward_function(lambda a, b: torch.tensor([1.5, 2.5]), [["x"], ["y"]]) == [1.5, 2.5]
    assert call_reward_function(lambda a, b: 3, [["x"], ["y"]]) == [3.0]


def test_batched_function_is_called_once_per_node() -> None:
    calls = []

    def reward(c1, c2):
        calls.append((list(c1), list(c2)))
        return [float(len(x) + len(y)) for x, y in zip(c1, c2, strict=True)]

    reward.batched = True
    totals, _ = TeamReward(reward).score(COMPLETIONS, ITEMS, PROMPTS)
    assert totals == [4.0, 6.0]
    assert calls == [(["a", "bb"], ["ccc", "dddd"])]


class LengthTerms:
    term_names = ["short", "long"]

    def score(self, agent_completions, batch_items, prompts):
        short = [float(len(c)) for c in agent_completions[0]]
        long = [float(len(c)) for c in agent_completions[1]]
        return [s + x for s, x in zip(short, long, strict=True)], {"short": short, "long": long}


def test_term_objects_return_totals_and_terms() -> None:
    reward = TeamReward(LengthTerms())
    assert reward.term_names == ["short", "long"]
    totals, terms = reward.score(COMPLETIONS, ITEMS, PROMPTS)
    assert totals == [4.0, 6.0]
    assert terms == {"short": [1.0, 2.0], "long": [3.0, 4.0]}


def test_reward_processor_is_applied_to_totals() -> None:
    totals, _ = TeamReward(two, RewardProcessors.shift(-4)).score(COMPLETIONS, ITEMS, PROMPTS)
    assert totals == [9.0, 20.0]
    assert RewardProcessors.scale(2)(1.5) == 3.0


def test_non_finite_reward_names_the_function() -> None:
    def broken(c1, c2):
        return [math.nan]

    with pytest.raises(RewardError, match="broken.*non-finite"):
        TeamReward(broken).score(COMPLETIONS, ITEMS, PROMPTS)


def test_wrong_length_names_the_function() -> None:
    def short(c1, c2):
        return [1.0]

    short.batched = True
    with pytest.raises(RewardError, match=r"short returned 1 value\(s\) for 2 joint action\(s\)"):
        TeamReward(short).score(COMPLETIONS, ITEMS, PROMPTS)


def test_signature_that_does_not_fit_the_team() -> None:
    def three(a, b, c):
        return [0.0]

    with pytest.raises(RewardError, match="does not fit a team of 2"):
        TeamReward(three).score(COMPLETIONS, ITEMS, PROMPTS)


def test_missing_reward_is_an_error() -> None:
    with pytest.raises(ValueError, match="reward_func is required"):
        TeamReward(None)


def test_one_reward_error_and_one_value_check_for_functions_and_terms() -> None:
    """Plain functions and task reward terms fail through the same check with the same error type."""
    from engine.rewards.team_reward import check_reward_values
    from engine.tasks import RewardError as TasksRewardError
    from engine.tasks import RewardTerm, RewardTerms, TaskError

    assert TasksRewardError is RewardError and issubclass(RewardError, TaskError)
    assert check_reward_values([1, 2.5], 2, "f") == [1.0, 2.5]
    with pytest.raises(RewardError, match=r"^f: value 1 is inf, a non-finite reward"):
        check_reward_values([1.0, math.inf], 2, "f")
    terms = RewardTerms(task="t", terms=[RewardTerm("x", lambda c, i, p: [math.nan] * len(i))])
    with pytest.raises(RewardError, match=r"task 't', reward 'x': value 0 is nan, a non-finite reward"):
        TeamReward(terms).score(COMPLETIONS, ITEMS, PROMPTS)
