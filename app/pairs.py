"""Preference pairs among a step's stored episodes (torch-free, no Streamlit).

The preference trainers (``madpo``, ``madpo_iter``) store each sampled pair of a step as two
training episodes: the winner at sample ``2n``, the loser at ``2n + 1``, with the team rewards and
the signed reward gap as advantage (``engine.preference.madpo.pair_episodes``); no table of their
own is needed. This module puts them back together for the transcripts view, and selects them by
reward gap (every stored pair episode carries its pair's gap, so a pair is selectable even when the
filters left out its other side).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from db.records import EpisodeView

PAIR_ALGORITHMS = ("madpo", "madpo_iter")


def stores_pairs(config: dict[str, Any] | None) -> bool:
    """Whether a run's training episodes are preference pairs (its algorithm stores them so)."""
    return ((config or {}).get("trainer") or {}).get("algorithm") in PAIR_ALGORITHMS


def preference_pairs(episodes: Sequence[EpisodeView]) -> list[tuple[EpisodeView, EpisodeView | None]]:
    """``(winner, loser)`` per pair, in sample order; a pair whose other side the filters or the
    episode limit left out comes as ``(episode, None)``; eval episodes are not pairs and come alone."""
    groups: dict[tuple[int, int, str, int], list[EpisodeView]] = {}
    for episode in sorted(episodes, key=lambda e: (e.step, e.run_id, e.sample_index)):
        pair = episode.sample_index // 2 if episode.split == "train" else -1 - episode.sample_index
        groups.setdefault((episode.step, episode.run_id, episode.split, pair), []).append(episode)
    out: list[tuple[EpisodeView, EpisodeView | None]] = []
    for group in groups.values():
        winner = next((e for e in group if e.split == "train" and e.sample_index % 2 == 0), None)
        loser = next((e for e in group if e.split == "train" and e.sample_index % 2 == 1), None)
        if winner is not None and loser is not None:
            out.append((winner, loser))
        else:
            out.extend((e, None) for e in group)
    return out


def pair_title(index: int, winner: EpisodeView, loser: EpisodeView) -> str:
    """``pair 1 · item 3 · winner 0.600 · loser 0.200 · reward gap +0.400``."""
    item = f" · item {winner.item_index}" if winner.item_index is not None else ""
    return (f"pair {index}{item} · winner {winner.reward:.3f} · loser {loser.reward:.3f} · "
            f"reward gap {winner.reward - loser.reward:+.3f}")


def pair_gap(episode: EpisodeView) -> float | None:
    """The reward gap of the pair a stored training episode belongs to (its advantage column holds the
    signed gap: + winner, - loser); None for an eval episode, which is no pair."""
    if episode.split != "train" or not episode.turns:
        return None
    return abs(episode.turns[0].advantage)


def pairs_by_gap(pairs: Sequence[tuple[EpisodeView, EpisodeView | None]], min_gap: float | None = None,
                 max_gap: float | None = None) -> list[tuple[EpisodeView, EpisodeView | None]]:
    """The pairs whose reward gap lies in ``[min_gap, max_gap]`` (None: unbounded); with a bound set,
    episodes that are no pair (eval) are left out."""
    if min_gap is None and max_gap is None:
        return list(pairs)
    kept = []
    for winner, loser in pairs:
        gap = pair_gap(winner)
        if gap is not None and (min_gap is None or gap >= min_gap) and (max_gap is None or gap <= max_gap):
            kept.append((winner, loser))
    return kept
