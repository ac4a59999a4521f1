"""The cooperative multi-agent trainer (MAGRPO family) and its CoMLRL-named presets."""

from engine.trainer.baseline_variants import MAREINFORCETrainer, MAReMaxTrainer, MARLOOTrainer
from engine.trainer.trainer import MAGRPOTrainer, TrainResult
from engine.trainer.tree import Node, Rollout

__all__ = ["MAGRPOTrainer", "MAREINFORCETrainer", "MAReMaxTrainer", "MARLOOTrainer", "Node", "Rollout",
           "TrainResult"]
