"""CoMLRL's ``comlrl.trainers.reinforce.maremax``: MAGRPO with the group maximum as baseline (``advantage_mode="max"``)."""

from __future__ import annotations

from typing import ClassVar

from engine.comlrl._configs import MAReMaxConfig
from engine.comlrl.trainers.reinforce.magrpo import MAGRPOTrainer
from engine.trainer import MAReMaxTrainer as _EngineMAReMaxTrainer

__all__ = ["MAReMaxConfig", "MAReMaxTrainer"]


class MAReMaxTrainer(MAGRPOTrainer):
    """CoMLRL's ``MAReMaxTrainer`` (MAGRPO's constructor) over :class:`engine.trainer.MAReMaxTrainer`."""

    default_config_cls: ClassVar[type] = MAReMaxConfig
    algorithm_name: ClassVar[str] = "MAReMax"
    _engine_class: ClassVar[type] = _EngineMAReMaxTrainer
