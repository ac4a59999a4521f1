"""CoMLRL's ``comlrl.trainers``: every trainer and config, re-exported."""

from engine.comlrl.trainers.actor_critic import (
    ActorCriticTrainerBase,
    IACConfig,
    IACTrainer,
    MAACConfig,
    MAACTrainer,
)
from engine.comlrl.trainers.preference import (
    JointRewardModel,
    MADPOConfig,
    MADPOTrainer,
    MARLHFConfig,
    MARLHFTrainer,
)
from engine.comlrl.trainers.reinforce import (
    MAGRPOConfig,
    MAGRPOTrainer,
    MAREINFORCEConfig,
    MAREINFORCETrainer,
    MAReMaxConfig,
    MAReMaxTrainer,
    MARLOOConfig,
    MARLOOTrainer,
)

__all__ = ["ActorCriticTrainerBase", "IACConfig", "IACTrainer", "MAACConfig", "MAACTrainer", "MAGRPOConfig",
           "MAGRPOTrainer", "MADPOConfig", "MADPOTrainer", "MARLHFConfig", "MARLHFTrainer", "JointRewardModel",
           "MAREINFORCEConfig", "MAREINFORCETrainer", "MAReMaxConfig", "MAReMaxTrainer", "MARLOOConfig",
           "MARLOOTrainer"]
