"""Actor-critic trainers: IAC (a critic per agent) and MAAC (one centralised critic), with CoMLRL's
config names and defaults, multi-turn TD(0) targets, value clipping and per-agent rewards.

The trainers load lazily, so ``import engine.actor_critic.config`` (plain dataclasses, used by the
dashboard form) does not import torch.
"""

from __future__ import annotations

from engine.lazy import lazy_exports

_EXPORTS = {
    "ActorCriticConfig": "engine.actor_critic.config",
    "IACConfig": "engine.actor_critic.config",
    "MAACConfig": "engine.actor_critic.config",
    "IACTrainer": "engine.actor_critic.iac",
    "MAACTrainer": "engine.actor_critic.maac",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
