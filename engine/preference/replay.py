"""Preference replay of the iterative trainers (CoMLRL 1.4.3's ``preference_replay_*``), pure functions.

Every iteration's collected pairs form a shard (oldest first, the current iteration's last). The
pairs an iteration trains on are drawn from the shards by ``preference_replay_mode``:

- ``current``: the current iteration's pairs, as collected (no draw);
- ``nearest_k``: ``sample_size`` draws over the newest ``k`` shards, each draw's shard uniform;
- ``all_history``: the same over every shard;
- ``lambda_decay``: over every shard, a shard of age a (0 = newest) weighted ``(1 - lam) * lam**a``
  (normalised; ``lam = 1`` is uniform, ``lam = 0`` the newest only).

``sample_size`` defaults to the current iteration's pair count (the newest non-empty shard's when
it has none). A shard drawn c times gives c of its pairs without replacement, whole shuffled passes
first when c exceeds its size; the drawn pairs are shuffled together. Empty shards are never drawn.
All randomness comes from the ``rng`` passed in (seeded by the trainer, saved in its checkpoints).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

REPLAY_MODES = ("current", "nearest_k", "all_history", "lambda_decay")


def lambda_decay_weights(num_shards: int, lam: float) -> list[float]:
    """Each shard's weight, oldest first: ``(1 - lam) * lam**age`` normalised (age 0 = newest)."""
    if num_shards < 1:
        return []
    if lam == 1.0:
        return [1.0 / num_shards] * num_shards
    newest_first = [(1.0 - lam) * lam**age for age in range(num_shards)]
    total = sum(newest_first)
    return [w / total for w in reversed(newest_first)]


def shards_kept(mode: str, k: int | None) -> int | None:
    """How many newest shards a mode can still draw from later (None: all of them)."""
    return {"current": 1, "nearest_k": k or 1}.get(mode)


def replay_pairs(shards: Sequence[Sequence[T]], mode: str, rng: random.Random, *, k: int | None = None,
                 lam: float | None = None, sample_size: int | None = None) -> list[T]:
    """The pairs to train on this iteration (see the module docstring); ``shards[-1]`` is the current one."""
    if mode == "current":
        return list(shards[-1]) if shards else []
    if mode not in REPLAY_MODES:
        raise ValueError(f"preference_replay_mode: unknown mode {mode!r}; expected one of {', '.join(REPLAY_MODES)}")
    size = sample_size
    if size is None:
        size = len(shards[-1]) if shards and shards[-1] else next((len(s) for s in reversed(shards) if s), 0)
    pool = list(shards[-(k or 1):]) if mode == "nearest_k" else list(shards)
    weights = [1.0] * len(pool)
    if mode == "lambda_decay":
        if lam is None:
            raise ValueError("preference_replay_lambda: preference_replay_mode='lambda_decay' needs it; set it")
        weights = lambda_decay_weights(len(pool), float(lam))
    eligible = [(shard, w) for shard, w in zip(pool, weights, strict=True) if shard and w > 0]
    if size <= 0 or not eligible:
        return []
    counts = [0] * len(eligible)
    for _ in range(size):
        counts[rng.choices(range(len(eligible)), weights=[w for _, w in eligible], k=1)[0]] += 1
    drawn: list[T] = []
    for (shard, _), count in zip(eligible, counts, strict=True):
        while count >= len(shard):  # whole passes, each shuffled
            batch = list(shard)
            rng.shuffle(batch)
            drawn += batch
            count -= len(shard)
        drawn += rng.sample(list(shard), k=count)
    rng.shuffle(drawn)
    return drawn
