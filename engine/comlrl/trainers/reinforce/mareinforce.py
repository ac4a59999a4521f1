"""CoMLRL's ``comlrl.trainers.reinforce.mareinforce``: MAGRPO with no baseline (``advantage_mode="raw"``)."""

from __future__ import annotations

from typing import ClassVar

from engine.comlrl._configs import MAREINFORCEConfig
from engine.comlrl.trainers.reinforce.magrpo import MAGRPOTrainer
from engine.trainer import MAREINFORCETrainer as _EngineMAREINFORCETrainer

__all__ = ["MAREINFORCEConfig", "MAREINFORCETrainer"]


class MAREINFORCETrainer(MAGRPOTrainer):
    """CoMLRL's ``MAREINFORCETrainer`` (MAGRPO's constructor) over :class:`engine.trainer.MAREINFORCETrainer`."""

    default_config_cls: ClassVar[type] = MAREINFORCEConfig
    algorithm_name: ClassVar[str] = "MAREINFORCE"
    _engine_class: ClassVar[type] = _EngineMAREINFORCETrainer
