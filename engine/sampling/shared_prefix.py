"""Shared prompt prefixes encoded once: the layout the lean decoder uses when prompts share long prefixes.

In a multi-turn rollout the next turn's prompts of a node's K children (and the agents' later turns
generally) repeat the item's text and the earlier turns: long common token prefixes. When several
of a call's P prompts share a prefix of at least :data:`MIN_SHARED_PREFIX` tokens, the lean decoder
(:func:`engine.sampling.lean_decoder._prefill`) encodes each distinct prefix once (G rows), selects the
cache rows to the P prompts, and encodes only the suffixes, continuing from that cache. Each row
is laid out as ``[pads][prefix][pads][suffix]`` over ``Wp + Ws`` columns: prefixes right-aligned
in the first ``Wp`` columns (the prefix forward's left padding), suffixes right-aligned in the last
``Ws`` (so every row's last real token sits in the last column, where the decode loop continues).
The attention mask is 0 on every pad and the position ids count real tokens only, so each real
token sees exactly the keys and positions it has when its prompt is encoded in full.

Prompts outside every group are single rows whose first tokens (at least one) go through the prefix
forward and the rest (up to ``Ws``) through the suffix forward. :func:`plan_prefixes` returns None
(encode every prompt in full) when no group reaches the threshold, a prompt has a single token, or
the layout would encode no fewer cells than the full prompts or widen the rows by more than half.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MIN_SHARED_PREFIX = 32  # tokens a group of prompts must share for its prefix to be encoded once
MAX_WIDENING = 1.5  # the layout's width (Wp + Ws) at most this times the left-padded prompts' width


@dataclass(frozen=True)
class PrefixLayout:
    """The split prompts of one call: G prefix rows, P suffix rows, and the full (P, Wp + Ws) layout."""

    prefix_ids: torch.Tensor  # (G, Wp) left-padded prefixes
    prefix_mask: torch.Tensor  # (G, Wp)
    rows: torch.Tensor  # (P,) the prefix row of each prompt
    suffix_ids: torch.Tensor  # (P, Ws) left-padded suffixes (at least one token each)
    mask: torch.Tensor  # (P, Wp + Ws) 1 on real tokens: [pads][prefix][pads][suffix]
    positions: torch.Tensor  # (P, Wp + Ws) each real token's position in its prompt (0 on pads)

    @property
    def prefix_width(self) -> int:
        return int(self.prefix_ids.shape[1])

    def prefix_positions(self) -> torch.Tensor:
        """(G, Wp) position ids of the prefix forward (every prefix starts at position 0)."""
        return (self.prefix_mask.cumsum(dim=1) - 1).masked_fill(self.prefix_mask == 0, 0)


def _common(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _best_groups(seqs: list[list[int]], order: list[int], adjacent: list[int], lo: int, hi: int,
                 threshold: int) -> tuple[int, list[tuple[list[int], int]]]:
    """The grouping of the sorted run ``order[lo:hi]`` that saves the most encoded tokens.

    Returns (tokens saved, [(prompt indices, shared prefix length)]); a group's prefix is capped at
    its shortest prompt's length minus one (every prompt keeps a suffix token). Either the run is
    one group (if its prefix reaches ``threshold``) or it splits where adjacent prompts share least.
    """
    members = order[lo:hi]
    if hi - lo == 1:
        return 0, [(members, 0)]
    least = min(adjacent[lo : hi - 1])
    shared = min(least, min(len(seqs[i]) for i in members) - 1)
    whole = ((hi - lo - 1) * shared, [(members, shared)]) if shared >= threshold else (0, [])
    saved, groups, start = 0, [], lo
    for cut in [j + 1 for j in range(lo, hi - 1) if adjacent[j] == least] + [hi]:
        part_saved, part_groups = _best_groups(seqs, order, adjacent, start, cut, threshold)
        saved, groups, start = saved + part_saved, groups + part_groups, cut
    return whole if whole[1] and whole[0] >= saved else (saved, groups)


def find_groups(seqs: list[list[int]], threshold: int = MIN_SHARED_PREFIX) -> list[tuple[list[int], int]]:
    """Groups of prompts (indices) with their shared prefix length (>= ``threshold``), singletons with 0."""
    order = sorted(range(len(seqs)), key=lambda i: seqs[i])
    adjacent = [_common(seqs[a], seqs[b]) for a, b in zip(order, order[1:], strict=False)]
    return _best_groups(seqs, order, adjacent, 0, len(order), threshold)[1]


def _splits(seqs: list[list[int]], groups: list[tuple[list[int], int]]) -> list[tuple[list[int], int]] | None:
    """(prompt indices, prefix length) per prefix row: groups as found, singletons split so their suffix
    fits the groups' widest suffix (their prefix keeps at least one token); None if a prompt is too short."""
    suffix_width = max((len(seqs[i]) - n for members, n in groups if len(members) > 1 for i in members), default=1)
    rows = []
    for members, n in groups:
        if len(members) == 1:
            length = len(seqs[members[0]])
            if length < 2:
                return None
            n = max(1, length - suffix_width)
        rows.append((members, n))
    return rows


def plan_prefixes(ids: torch.Tensor, mask: torch.Tensor, pad_id: int,
                  threshold: int = MIN_SHARED_PREFIX) -> PrefixLayout | None:
    """The prefix layout of left-padded (P, Lp) prompts, or None when it does not pay (see the module doc)."""
    seqs = [row[keep.bool()].tolist() for row, keep in zip(ids, mask, strict=True)]
    groups = find_groups(seqs, threshold)
    if not any(len(members) > 1 for members, _ in groups):
        return None
    splits = _splits(seqs, groups)
    if splits is None:
        return None
    wp = max(n for _, n in splits)
    ws = max(len(seqs[i]) - n for members, n in splits for i in members)
    width = int(ids.shape[1])
    if len(splits) * wp + len(seqs) * ws >= len(seqs) * width or wp + ws > MAX_WIDENING * width:
        return None
    return _layout(seqs, splits, wp, ws, pad_id, ids.device)


def _layout(seqs: list[list[int]], splits: list[tuple[list[int], int]], wp: int, ws: int, pad_id: int,
            device: torch.device) -> PrefixLayout:
    """Fill the layout's tensors (pads carry ``pad_id``; their values never reach a real token)."""
    count = len(seqs)
    prefix_ids = torch.full((len(splits), wp), pad_id, dtype=torch.long)
    prefix_mask = torch.zeros((len(splits), wp), dtype=torch.long)
    rows = torch.zeros(count, dtype=torch.long)
    suffix_ids = torch.full((count, ws), pad_id, dtype=torch.long)
    mask = torch.zeros((count, wp + ws), dtype=torch.long)
    for group, (members, n) in enumerate(splits):
        prefix = seqs[members[0]][:n]
        prefix_ids[group, wp - n :] = torch.as_tensor(prefix, dtype=torch.long)
        prefix_mask[group, wp - n :] = 1
        for i in members:
            suffix = seqs[i][n:]
            rows[i] = group
            suffix_ids[i, ws - len(suffix) :] = torch.as_tensor(suffix, dtype=torch.long)
            mask[i, wp - n : wp] = 1
            mask[i, wp + ws - len(suffix) :] = 1
    positions = (mask.cumsum(dim=1) - 1).masked_fill(mask == 0, 0)
    return PrefixLayout(prefix_ids.to(device), prefix_mask.to(device), rows.to(device), suffix_ids.to(device),
                        mask.to(device), positions.to(device))
