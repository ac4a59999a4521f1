"""Preference replay (CoMLRL's preference_replay_*): shard weights and draws on fixed shards, the
config's rules, and the same draws from the same seed."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from engine import MADPOIterConfig, MARLHFIterConfig
from engine.preference.replay import lambda_decay_weights, replay_pairs, shards_kept


def test_lambda_decay_weights_by_hand() -> None:
    # newest first (1 - 0.5) * 0.5**age = 0.5, 0.25, 0.125, normalised by 0.875, returned oldest first
    assert lambda_decay_weights(3, 0.5) == pytest.approx([0.125 / 0.875, 0.25 / 0.875, 0.5 / 0.875])
    assert lambda_decay_weights(4, 1.0) == [0.25] * 4
    assert lambda_decay_weights(3, 0.0) == [0.0, 0.0, 1.0]  # the newest only
    assert lambda_decay_weights(0, 0.5) == []


def test_draws_follow_the_mode() -> None:
    shards = [["a0", "a1"], [], ["c0", "c1", "c2"]]
    assert replay_pairs(shards, "current", random.Random(0)) == ["c0", "c1", "c2"]
    newest = replay_pairs(shards, "nearest_k", random.Random(0), k=1, sample_size=7)
    assert sorted(Counter(newest).values()) == [2, 2, 3]  # two whole passes, then one more without replacement
    everything = replay_pairs(shards, "all_history", random.Random(1), sample_size=50)
    assert len(everything) == 50 and set(everything) == {"a0", "a1", "c0", "c1", "c2"}  # never the empty shard
    assert set(replay_pairs(shards, "lambda_decay", random.Random(2), lam=0.0)) <= {"c0", "c1", "c2"}
    assert len(replay_pairs(shards, "all_history", random.Random(3))) == 3  # default: the current pair count
    assert len(replay_pairs([["a0", "a1"], []], "all_history", random.Random(3))) == 2  # newest non-empty
    assert replay_pairs(shards, "all_history", random.Random(4), sample_size=9) == replay_pairs(
        shards, "all_history", random.Random(4), sample_size=9)  # seeded
    assert (shards_kept("current", None), shards_kept("nearest_k", 3), shards_kept("all_history", None)) == (1, 3, None)
    with pytest.raises(ValueError, match="unknown mode 'newest'"):
        replay_pairs(shards, "newest", random.Random(0))


def test_config_rules_and_comlrl_spellings() -> None:
    assert MADPOIterConfig().preference_replay_mode == "current"  # CoMLRL's default
    assert MADPOIterConfig(preference_replay_mode="td_lambda", preference_replay_lambda=0.5).preference_replay_mode \
        == "lambda_decay"
    with pytest.raises(ValueError, match="preference_replay_k: preference_replay_mode='nearest_k' needs it"):
        MADPOIterConfig(preference_replay_mode="last_k")
    with pytest.raises(ValueError, match="preference_replay_lambda: only preference_replay_mode='lambda_decay'"):
        MARLHFIterConfig(preference_replay_mode="all_history", preference_replay_lambda=0.3)
    with pytest.raises(ValueError, match="preference_replay_sample_size: preference_replay_mode='current'"):
        MARLHFIterConfig(preference_replay_sample_size=4)
    with pytest.raises(ValueError, match="preference_replay_lambda"):
        MADPOIterConfig(preference_replay_mode="lambda_decay", preference_replay_lambda=1.5)


def test_lambda_decay_without_a_lambda_names_the_setting():
    with pytest.raises(ValueError, match="^preference_replay_lambda: "):
        replay_pairs([["a"], ["b"]], "lambda_decay", random.Random(0))
