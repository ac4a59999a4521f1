"""Preference pairs: which joint candidates of an item are compared (pure selection on rewards),
and the pair records built from a scored single-turn rollout.

A pair is two joint candidates of the same item with different team rewards; every agent's
completion in the better one is its "winner", in the worse one its "loser".
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

PAIR_SELECTIONS = ("reward_gap", "all", "random")


def select_pairs(rewards: Sequence[float], mode: str, limit: int | None,
                 rng: random.Random | None = None) -> list[tuple[int, int]]:
    """Ordered ``(winner, loser)`` candidate indices with a positive reward gap (ties are never pairs).

    ``reward_gap``: largest gap first (equal gaps keep candidate order); ``all``: candidate order
    (winner, then loser index); ``random``: shuffled with ``rng`` (seeded by the trainer). At most
    ``limit`` pairs are kept (``None`` = all of them), as CoMLRL does.
    """
    if mode not in PAIR_SELECTIONS:
        raise ValueError(f"pair_selection must be one of {', '.join(PAIR_SELECTIONS)}, got {mode!r}")
    candidates = [(float(rw) - float(rl), w, lo) for w, rw in enumerate(rewards) for lo, rl in enumerate(rewards)
                  if w != lo and float(rw) - float(rl) > 0]
    if mode == "reward_gap":
        candidates.sort(key=lambda c: -c[0])  # stable: equal gaps stay in candidate order
    elif mode == "random":
        if rng is None:
            raise ValueError("pair_selection='random' needs a seeded random.Random")
        rng.shuffle(candidates)
    if limit is not None:
        candidates = candidates[:limit]
    return [(w, lo) for _, w, lo in candidates]


@dataclass
class PreferencePair:
    """Two joint answers to one item, ordered by team reward, with every agent's tokens.

    Lists are per agent. ``reference_deltas`` holds each agent's frozen-reference margin
    ``log pi_ref(winner) - log pi_ref(loser)`` when the DPO loss is reference-anchored.
    """

    item_index: int
    prompts: list[str]  # what each agent saw for the winner (the loser's differ only with sequential turns)
    loser_prompts: list[str]
    winner_completions: list[str]
    loser_completions: list[str]
    prompt_ids: list[list[int]]
    loser_prompt_ids: list[list[int]]
    winner_ids: list[list[int]]
    loser_ids: list[list[int]]
    winner_reward: float
    loser_reward: float
    candidate_reward_mean: float
    reference_deltas: list[float] | None = None

    @property
    def reward_gap(self) -> float:
        return self.winner_reward - self.loser_reward

    def to_state(self) -> dict[str, Any]:
        """Plain lists, numbers and strings (a checkpoint loads them with ``weights_only``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> PreferencePair:
        return cls(**state)


def pairs_from_node(node: Any, mode: str, limit: int | None, rng: random.Random) -> list[PreferencePair]:
    """The pairs of one scored single-turn node (:class:`engine.trainer.tree.Node`): joint action
    ``j`` gives agent i its sample ``node.joint_actions[j][i]``."""
    chosen = select_pairs(node.rewards, mode, limit, rng)
    mean = sum(node.rewards) / len(node.rewards) if node.rewards else 0.0
    pairs = []
    for w, lo in chosen:
        win, lose = node.joint_actions[w], node.joint_actions[lo]
        agents = node.agents
        pairs.append(PreferencePair(
            item_index=node.item_index,
            prompts=[a.prompts[win[i]] for i, a in enumerate(agents)],
            loser_prompts=[a.prompts[lose[i]] for i, a in enumerate(agents)],
            winner_completions=[a.texts[win[i]] for i, a in enumerate(agents)],
            loser_completions=[a.texts[lose[i]] for i, a in enumerate(agents)],
            prompt_ids=[list(a.prompt_ids[win[i]]) for i, a in enumerate(agents)],
            loser_prompt_ids=[list(a.prompt_ids[lose[i]]) for i, a in enumerate(agents)],
            winner_ids=[list(a.completion_ids[win[i]]) for i, a in enumerate(agents)],
            loser_ids=[list(a.completion_ids[lose[i]]) for i, a in enumerate(agents)],
            winner_reward=float(node.rewards[w]), loser_reward=float(node.rewards[lo]), candidate_reward_mean=mean,
        ))
    return pairs
