"""CoMLRL's ``comlrl.trainers.actor_critic``: IAC and MAAC."""

from engine.comlrl.trainers.actor_critic.ac_base import ActorCriticTrainerBase
from engine.comlrl.trainers.actor_critic.iac import IACConfig, IACTrainer, RolloutSample
from engine.comlrl.trainers.actor_critic.maac import MAACConfig, MAACTrainer

__all__ = ["ActorCriticTrainerBase", "IACConfig", "IACTrainer", "RolloutSample", "MAACConfig", "MAACTrainer"]
