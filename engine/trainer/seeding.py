"""The run's seed: the config's, or, when the config gives none, one drawn from torch's global RNG.

CoMLRL has no seed setting: its runs continue torch's global RNG, so a script picks its run with
``torch.manual_seed(S)`` before ``train()``. CoopLab's config classes therefore default ``seed`` to
``None`` and then draw the run's seed from that RNG (:func:`draw_seed`): once when the trainer is
built, so it can step at once, and again when ``train()`` starts a fresh run, so a script that seeds
after building the trainer picks its run too. The global RNGs are left to continue (never reseeded);
the drawn seed seeds the trainer's own streams like a given one, is announced when training starts,
and is kept in checkpoints, so a resumed run continues with it. A given seed (every run config records
one) seeds everything (:func:`seed_everything`) and the run reproduces whatever the global RNG holds.

The streams a seed derives (:func:`generator_seed`, :func:`update_seed`, :func:`report_seed`) are
pure functions of it, so a trainer can seed them again in place when it draws its seed anew.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np
import torch

SEED_LIMIT = 2**31 - 1  # drawn seeds stay below this: every derived seed fits torch's and NumPy's ranges


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def draw_seed() -> int:
    """A run seed drawn from torch's global RNG (advancing it, as CoMLRL's sampling would)."""
    return int(torch.randint(0, SEED_LIMIT, (1,)).item())


def seeded_config(config: Any) -> tuple[Any, bool]:
    """``(config, drawn)``: ``config`` itself when it gives a seed, else a copy with a drawn seed (the
    caller's object keeps ``seed=None``, so it can configure another run that draws its own)."""
    if getattr(config, "seed", 0) is not None:
        return config, False
    config = copy.copy(config)
    config.seed = draw_seed()
    return config, True


def generator_seed(seed: int, agent_index: int) -> int:
    """Agent ``agent_index``'s sampling generator."""
    return seed * 1000 + agent_index


def update_seed(seed: int, stream: int) -> int:
    """Update stream ``stream``'s mini-batch order (one per agent)."""
    return seed * 7919 + stream


def report_seed(seed: int) -> int:
    """Which episodes a step reports (and which joint actions its credit probes draw)."""
    return seed + 104729


def seed_note(seed: int) -> str:
    """The start-up line of a run whose config gave no seed."""
    return (f"seed: {seed}, drawn from torch's global RNG (the config gives none; as in CoMLRL, "
            f"torch.manual_seed before train() picks the run; set seed={seed} to repeat this one)")
