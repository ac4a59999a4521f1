"""The cooperative multi-agent trainer (MAGRPO family) and its CoMLRL-named presets."""

from engine.trainer.loop import TrainResult
from engine.trainer.magrpo import MAGRPOTrainer, MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer
from engine.trainer.tree import Node, Rollout

__all__ = ["MAGRPOTrainer", "MAREINFORCETrainer", "MAReMaxTrainer", "MARLOOTrainer", "Node", "Rollout",
           "TrainResult"]
