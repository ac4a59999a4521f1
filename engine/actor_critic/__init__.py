"""Actor-critic trainers: IAC (a critic per agent) and MAAC (one centralised critic), with CoMLRL's
config names and defaults, multi-turn TD(0) targets, value clipping and per-agent rewards.

The trainers load lazily, so ``import engine.schema.actor_critic_configs`` (plain dataclasses, used by the
dashboard form) does not import torch.
"""

from __future__ import annotations

from engine.lazy import lazy_exports

# module -> the public names it defines
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "engine.schema.actor_critic_configs": ("ActorCriticConfig", "IACConfig", "MAACConfig"),
    "engine.actor_critic.iac": ("IACTrainer",),
    "engine.actor_critic.maac": ("MAACTrainer",),
})
