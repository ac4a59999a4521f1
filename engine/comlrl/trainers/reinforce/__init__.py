"""CoMLRL's ``comlrl.trainers.reinforce``: MAGRPO, its baseline presets and centralized MAGRPO."""

from engine.comlrl.trainers.reinforce.centralized_magrpo import (
           CentralizedMAGRPOConfig,
           CentralizedMAGRPOTrainer,
)
from engine.comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer
from engine.comlrl.trainers.reinforce.mareinforce import MAREINFORCEConfig, MAREINFORCETrainer
from engine.comlrl.trainers.reinforce.maremax import MAReMaxConfig, MAReMaxTrainer
from engine.comlrl.trainers.reinforce.marloo import MARLOOConfig, MARLOOTrainer

__all__ = ["MAGRPOConfig", "MAGRPOTrainer", "CentralizedMAGRPOConfig", "CentralizedMAGRPOTrainer",
           "MAREINFORCEConfig", "MAREINFORCETrainer", "MAReMaxConfig", "MAReMaxTrainer", "MARLOOConfig",
           "MARLOOTrainer"]
