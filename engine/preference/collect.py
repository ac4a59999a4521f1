"""Collecting preference pairs over a training set, resumably: items in dataset order,
``items_per_step`` per sampling call (every agent samples all of them at once), the joint
candidates scored with the task's team reward, pairs selected per item (:func:`select_pairs`).

Shared by MADPO (pairs train the policies) and MARLHF (pairs train the reward model). The
collector's whole state is plain data, so it rides in a checkpoint and a stopped collection
continues exactly.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from engine.preference.pairs import PreferencePair, pairs_from_node


class PairCollector:
    """Pairs of a dataset, built chunk by chunk (see the module docstring)."""

    def __init__(self, tree: Any, dataset: Any, num_items: int, *, selection: str, limit: int | None,
                 items_per_chunk: int, seed: int) -> None:
        self.tree = tree  # a TreeBuilder sampling preference_num_candidates per agent, single-turn
        self.dataset = dataset
        self.num_items = num_items
        self.selection = selection
        self.limit = limit
        self.items_per_chunk = items_per_chunk
        self.rng = random.Random()
        self.reseed(seed)
        self.pairs: list[PreferencePair] = []
        self.collected_items = 0
        self.stats: dict[str, float] = {}
        self.comparator_tree: Any = None  # iterative trainers: another policy's candidates to compare with
        self.rewards: dict[str, list[float]] = {"current": [], "comparator": []}  # the candidates' team rewards

    def reseed(self, seed: int) -> None:
        """Seed the pair order and random selection from the run seed (again, when a run draws its seed
        anew as ``train()`` starts)."""
        self.rng.seed(seed * 31 + 7)

    def reset(self) -> None:
        """Start a new collection (an iteration of the iterative trainers); the RNG continues."""
        self.pairs, self.collected_items, self.stats = [], 0, {}
        self.rewards = {"current": [], "comparator": []}

    def reward_series(self) -> dict[str, list[float]]:
        """The collection's team rewards: every current and comparator candidate, the pairs' winners and
        losers (:mod:`engine.preference.reward_distribution`'s series)."""
        return {**{k: list(v) for k, v in self.rewards.items()},
                "winner": [p.winner_reward for p in self.pairs], "loser": [p.loser_reward for p in self.pairs]}

    @property
    def done(self) -> bool:
        return self.collected_items >= self.num_items

    def collect(self, should_stop: Callable[[], bool],
                on_chunk: Callable[[list[PreferencePair], Any], None] | None = None) -> bool:
        """Collect until every item is done (True) or ``should_stop()`` answers True between chunks
        (False). ``on_chunk(new_pairs, rollout)`` sees each chunk before its pairs are kept."""
        while not self.done:
            if should_stop():
                return False
            indices = list(range(self.collected_items, min(self.collected_items + self.items_per_chunk,
                                                            self.num_items)))
            started = time.perf_counter()
            rollout = self.tree.build([dict(self.dataset[i]) for i in indices], indices, score=True)
            others = (self.comparator_tree.build([dict(self.dataset[i]) for i in indices], indices, score=True).roots
                      if self.comparator_tree is not None else [None] * len(rollout.roots))
            new = [p for root, other in zip(rollout.roots, others, strict=True)
                   for p in pairs_from_node(root, self.selection, self.limit, self.rng, comparator=other)]
            if on_chunk is not None:
                on_chunk(new, rollout)
            self.pairs.extend(new)
            self.collected_items += len(indices)
            paired = {p.item_index for p in new}
            rewards = [r for root in rollout.roots for r in root.rewards]
            self.rewards["current"].extend(float(r) for r in rewards)
            self.rewards["comparator"].extend(float(r) for root in others if root is not None for r in root.rewards)
            for key, value in (("candidate_reward_sum", sum(rewards)), ("candidates", len(rewards)),
                               ("items_without_pairs", sum(1 for root in rollout.roots if root.item_index not in paired)),
                               ("generate_s", rollout.timings["generate_s"]), ("reward_s", rollout.timings["reward_s"]),
                               ("tokens", rollout.num_tokens), ("collect_s", time.perf_counter() - started)):
                self.stats[key] = self.stats.get(key, 0.0) + float(value)
        if not self.pairs:
            raise ValueError(f"no preference pair: the {self.num_items} items' candidates all tied on team reward. "
                             f"Raise preference_num_candidates or temperature, or use a reward that separates answers")
        return True

    def metrics(self) -> dict[str, float]:
        """``pairs/...`` and the collection's ``perf/...`` metrics."""
        s = self.stats
        return {
            "pairs/total": float(len(self.pairs)),
            "pairs/reward_gap_mean": sum(p.reward_gap for p in self.pairs) / max(len(self.pairs), 1),
            "pairs/candidate_reward_mean": s.get("candidate_reward_sum", 0.0) / max(s.get("candidates", 0.0), 1.0),
            "pairs/items_without_pairs": s.get("items_without_pairs", 0.0),
            "perf/collect_s": s.get("collect_s", 0.0),
            "perf/generate_s": s.get("generate_s", 0.0),
            "perf/reward_s": s.get("reward_s", 0.0),
            "perf/tokens_per_s": s.get("tokens", 0.0) / s["generate_s"] if s.get("generate_s") else 0.0,
        }

    def state(self) -> dict[str, Any]:
        """Plain data (a checkpoint loads it with ``weights_only``)."""
        version, internal, gauss = self.rng.getstate()
        return {"pairs": [p.to_state() for p in self.pairs], "collected_items": self.collected_items,
                "stats": dict(self.stats), "rng": [version, list(internal), gauss],
                "rewards": {k: list(v) for k, v in self.rewards.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        self.pairs = [PreferencePair.from_state(p) for p in state["pairs"]]
        self.collected_items = int(state["collected_items"])
        self.stats = {k: float(v) for k, v in state["stats"].items()}
        saved = state.get("rewards") or {}  # checkpoints written before the rewards were kept have none
        self.rewards = {k: [float(r) for r in saved.get(k, [])] for k in ("current", "comparator")}
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
