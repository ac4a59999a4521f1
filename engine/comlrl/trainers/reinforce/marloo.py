"""CoMLRL's ``comlrl.trainers.reinforce.marloo``: MAGRPO with the leave-one-out mean as baseline (``advantage_mode="rloo"``)."""

from __future__ import annotations

from typing import ClassVar

from engine.comlrl._configs import MARLOOConfig
from engine.comlrl.trainers.reinforce.magrpo import MAGRPOTrainer
from engine.trainer import MARLOOTrainer as _EngineMARLOOTrainer

__all__ = ["MARLOOConfig", "MARLOOTrainer"]


class MARLOOTrainer(MAGRPOTrainer):
    """CoMLRL's ``MARLOOTrainer`` (MAGRPO's constructor) over :class:`engine.trainer.MARLOOTrainer`."""

    default_config_cls: ClassVar[type] = MARLOOConfig
    algorithm_name: ClassVar[str] = "MARLOO"
    _engine_class: ClassVar[type] = _EngineMARLOOTrainer
