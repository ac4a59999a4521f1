"""Pair selection on fixed team rewards: ordered pairs with a positive gap, by each mode."""

from __future__ import annotations

import random

import pytest

from engine.preference.pairs import select_cross_pairs, select_pairs

REWARDS = [0.2, 1.0, 0.2, 0.5]  # candidates 0 and 2 tie


def test_reward_gap_takes_the_largest_gaps_first() -> None:
    # gaps: (1,0)=0.8, (1,2)=0.8, (1,3)=0.5, (3,0)=0.3, (3,2)=0.3; equal gaps keep candidate order
    assert select_pairs(REWARDS, "reward_gap", None) == [(1, 0), (1, 2), (1, 3), (3, 0), (3, 2)]
    assert select_pairs(REWARDS, "reward_gap", 2) == [(1, 0), (1, 2)]


def test_all_keeps_candidate_order_and_never_pairs_ties() -> None:
    assert select_pairs(REWARDS, "all", None) == [(1, 0), (1, 2), (1, 3), (3, 0), (3, 2)]
    assert select_pairs([0.0, 0.5], "all", None) == [(1, 0)]
    assert select_pairs([0.3, 0.3, 0.3], "all", None) == []  # every candidate ties: no pair


def test_random_is_a_seeded_subset_of_the_positive_pairs() -> None:
    first = select_pairs(REWARDS, "random", 3, random.Random(5))
    assert first == select_pairs(REWARDS, "random", 3, random.Random(5))
    assert len(first) == 3 and set(first) <= set(select_pairs(REWARDS, "all", None))
    orders = {tuple(select_pairs(REWARDS, "random", None, random.Random(seed))) for seed in range(8)}
    assert len(orders) > 1  # the order depends on the seed
    with pytest.raises(ValueError, match="seeded"):
        select_pairs(REWARDS, "random", None)


def test_unknown_mode_names_the_choices() -> None:
    with pytest.raises(ValueError, match="reward_gap, all, random"):
        select_pairs(REWARDS, "best", None)


def test_cross_pairs_join_one_current_and_one_comparator_candidate() -> None:
    # current rewards [0.5, 0.1], comparator [0.3, 0.5]: gaps (0,0)-(1,0)=0.2, (1,1)-(0,1)=0.4, (1,0)-(0,1)=0.2;
    # current 0 and comparator 1 tie (no pair)
    pairs = select_cross_pairs([0.5, 0.1], [0.3, 0.5], "comparator_reward", None)
    assert pairs == [((1, 1), (0, 1)), ((0, 0), (1, 0)), ((1, 0), (0, 1))]
    assert select_cross_pairs([0.5, 0.1], [0.3, 0.5], "all", None) == [((0, 0), (1, 0)), ((1, 0), (0, 1)),
                                                                        ((1, 1), (0, 1))]
    assert select_cross_pairs([0.5, 0.1], [0.3, 0.5], "reward_gap", 1) == [((1, 1), (0, 1))]
    assert all({w[0], lo[0]} == {0, 1} for w, lo in select_cross_pairs([0.5, 0.1], [0.3, 0.5], "random", None,
                                                                      random.Random(0)))
