"""Which prompts each rank samples and scores: whole groups, so a prompt's ``K`` samples (and their
group baseline) stay on one rank. Pure functions, no torch.
"""

from __future__ import annotations


def rank_groups(groups: int, world: int, rank: int) -> range:
    """The groups (prompts) of a step that ``rank`` of ``world`` takes: contiguous blocks, the first
    ``groups % world`` ranks one more. Every group goes to exactly one rank."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"rank must be in 0..world-1 and world >= 1 (got rank {rank}, world {world})")
    if groups < 0:
        raise ValueError(f"groups must be >= 0 (got {groups})")
    base, extra = divmod(groups, world)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))


def rank_samples(groups: int, k: int, world: int, rank: int) -> range:
    """The sample rows of ``rank``: its groups' ``k`` samples each, rows laid out group after group."""
    mine = rank_groups(groups, world, rank)
    return range(mine.start * k, mine.stop * k)


def group_advantages(rewards: list[float], k: int, *, baseline: bool = True) -> list[float]:
    """GRPO's advantage of each sample: its reward minus the mean reward of its group of ``k``
    consecutive samples (``baseline=False``: the reward itself). Computed where the whole group is."""
    if k < 1 or len(rewards) % k:
        raise ValueError(f"{len(rewards)} rewards do not make groups of k={k}; give k samples per prompt")
    out: list[float] = []
    for start in range(0, len(rewards), k):
        group = rewards[start:start + k]
        mean = sum(group) / k if baseline else 0.0
        out += [r - mean for r in group]
    return out


def loss_scale(local_rows: int, total_rows: int, world: int) -> float:
    """The factor of a rank's batch-mean loss so that FSDP's mean of the ranks' gradients equals the
    gradient of the mean over all ``total_rows``: ``local_rows * world / total_rows`` (1 for an even
    split)."""
    if total_rows <= 0:
        raise ValueError("a step needs at least one sample")
    return local_rows * world / total_rows
