"""The cooperative multi-agent trainer (MAGRPO family) and its CoMLRL-named presets."""

from engine.trainer.core import TrainResult
from engine.trainer.magrpo import MAGRPOTrainer
from engine.trainer.presets import MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer
from engine.trainer.rollout import Node, Rollout

__all__ = ["MAGRPOTrainer", "MAREINFORCETrainer", "MAReMaxTrainer", "MARLOOTrainer", "Node", "Rollout",
           "TrainResult"]
