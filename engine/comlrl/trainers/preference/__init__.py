"""CoMLRL's ``comlrl.trainers.preference``: MADPO, MARLHF, their iterative forms and the centralized
protocol."""

from engine.comlrl.trainers.preference.centralized import (
    CentralizedComparatorAdapter,
    CentralizedComparatorParseError,
    TaggedCentralizedComparatorAdapter,
)
from engine.comlrl.trainers.preference.iterative import (
    MADPOIterConfig,
    MADPOIterTrainer,
    MARLHFIterConfig,
    MARLHFIterTrainer,
)
from engine.comlrl.trainers.preference.madpo import MADPOConfig, MADPOTrainer
from engine.comlrl.trainers.preference.marlhf import JointRewardModel, MARLHFConfig, MARLHFTrainer

__all__ = ["MADPOConfig", "MADPOTrainer", "CentralizedComparatorAdapter", "CentralizedComparatorParseError",
           "TaggedCentralizedComparatorAdapter", "MADPOIterConfig", "MADPOIterTrainer", "MARLHFConfig",
           "MARLHFTrainer", "MARLHFIterConfig", "MARLHFIterTrainer", "JointRewardModel"]
