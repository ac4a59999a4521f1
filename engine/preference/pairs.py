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

PAIR_SELECTIONS = ("reward_gap", "all", "random", "comparator_reward")


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
    if mode in ("reward_gap", "comparator_reward"):
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


def select_cross_pairs(current: Sequence[float], comparator: Sequence[float], mode: str, limit: int | None,
                       rng: random.Random | None = None) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Pairs between a current candidate ``(0, i)`` and a comparator candidate ``(1, c)``, the better
    one first, ordered as :func:`select_pairs` orders them (``comparator_reward`` = largest gap)."""
    if mode not in PAIR_SELECTIONS:
        raise ValueError(f"pair_selection must be one of {', '.join(PAIR_SELECTIONS)}, got {mode!r}")
    candidates = []
    for i, ri in enumerate(current):
        for c, rc in enumerate(comparator):
            gap = float(ri) - float(rc)
            if gap:
                candidates.append((abs(gap), (0, i), (1, c)) if gap > 0 else (abs(gap), (1, c), (0, i)))
    if mode in ("reward_gap", "comparator_reward"):
        candidates.sort(key=lambda c: -c[0])
    elif mode == "all":
        candidates.sort(key=lambda c: (c[1], c[2]))
    else:
        if rng is None:
            raise ValueError("pair_selection='random' needs a seeded random.Random")
        rng.shuffle(candidates)
    return [(w, lo) for _, w, lo in (candidates if limit is None else candidates[:limit])]


def pairs_from_node(node: Any, mode: str, limit: int | None, rng: random.Random,
                    comparator: Any = None) -> list[PreferencePair]:
    """The pairs of one scored single-turn node (:class:`engine.trainer.rollout.Node`): joint action
    ``j`` gives agent i its sample ``node.joint_actions[j][i]``. With a ``comparator`` node (the same
    item, another policy's candidates) every pair has one candidate from each."""
    if comparator is None:
        chosen = [((node, w), (node, lo)) for w, lo in select_pairs(node.rewards, mode, limit, rng)]
        rewards = list(node.rewards)
    else:
        sources = (node, comparator)
        chosen = [((sources[ws], w), (sources[ls], lo))
                  for (ws, w), (ls, lo) in select_cross_pairs(node.rewards, comparator.rewards, mode, limit, rng)]
        rewards = list(node.rewards) + list(comparator.rewards)
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    return [_pair(node.item_index, win, lose, mean) for win, lose in chosen]


def _pair(item_index: int, win: tuple[Any, int], lose: tuple[Any, int], mean: float) -> PreferencePair:
    (wn, w), (ln, lo) = win, lose
    wa, la = wn.joint_actions[w], ln.joint_actions[lo]
    n = len(wn.agents)
    return PreferencePair(
        item_index=item_index,
        prompts=[wn.agents[i].prompts[wa[i]] for i in range(n)],
        loser_prompts=[ln.agents[i].prompts[la[i]] for i in range(n)],
        winner_completions=[wn.agents[i].texts[wa[i]] for i in range(n)],
        loser_completions=[ln.agents[i].texts[la[i]] for i in range(n)],
        prompt_ids=[list(wn.agents[i].prompt_ids[wa[i]]) for i in range(n)],
        loser_prompt_ids=[list(ln.agents[i].prompt_ids[la[i]]) for i in range(n)],
        winner_ids=[list(wn.agents[i].completion_ids[wa[i]]) for i in range(n)],
        loser_ids=[list(ln.agents[i].completion_ids[la[i]]) for i in range(n)],
        winner_reward=float(wn.rewards[w]), loser_reward=float(ln.rewards[lo]), candidate_reward_mean=mean,
    )
