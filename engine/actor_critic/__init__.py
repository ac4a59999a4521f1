"""Actor-critic trainers: IAC (a critic per agent) and MAAC (one centralised critic), with CoMLRL's
config names and defaults, multi-turn TD(0) targets, value clipping and per-agent rewards."""

from engine.actor_critic.config import ActorCriticConfig, IACConfig, MAACConfig
from engine.actor_critic.iac import IACTrainer
from engine.actor_critic.maac import MAACTrainer

__all__ = ["ActorCriticConfig", "IACConfig", "IACTrainer", "MAACConfig", "MAACTrainer"]
