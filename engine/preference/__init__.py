"""Preference trainers: MADPO (team-reward-labelled preference pairs, a DPO loss factorised over
agents), with CoMLRL's config names and defaults.

The trainers load lazily, so ``import engine.preference.config`` (plain dataclasses, used by the
dashboard form) does not import torch.
"""

from __future__ import annotations

from engine.lazy import lazy_exports

_EXPORTS = {
    "MADPOConfig": "engine.preference.config",
    "MADPOTrainer": "engine.preference.madpo",
    "PreferencePair": "engine.preference.pairs",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
