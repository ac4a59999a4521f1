"""CoMLRL's ``comlrl.trainers.preference.iterative``: MADPO and MARLHF in rounds against a
comparator policy (``MADPOIterConfig``/``MADPOIterTrainer``, ``MARLHFIterConfig``/``MARLHFIterTrainer``)."""

from __future__ import annotations

from typing import ClassVar

from engine.comlrl._configs import MADPOIterConfig, MARLHFIterConfig
from engine.comlrl.trainers.preference.madpo import MADPOTrainer
from engine.comlrl.trainers.preference.marlhf import MARLHFTrainer
from engine.preference.madpo_iter import MADPOIterTrainer as _EngineMADPOIterTrainer
from engine.preference.marlhf_iter import MARLHFIterTrainer as _EngineMARLHFIterTrainer

__all__ = ["MADPOIterConfig", "MADPOIterTrainer", "MARLHFIterConfig", "MARLHFIterTrainer"]


class MADPOIterTrainer(MADPOTrainer):
    """CoMLRL's ``MADPOIterTrainer`` over :class:`engine.preference.madpo_iter.MADPOIterTrainer`."""

    default_config_cls: ClassVar[type] = MADPOIterConfig
    algorithm_name: ClassVar[str] = "MADPOIter"
    _engine_class: ClassVar[type] = _EngineMADPOIterTrainer
    iterative: ClassVar[bool] = True


class MARLHFIterTrainer(MARLHFTrainer):
    """CoMLRL's ``MARLHFIterTrainer`` over :class:`engine.preference.marlhf_iter.MARLHFIterTrainer`."""

    default_config_cls: ClassVar[type] = MARLHFIterConfig
    algorithm_name: ClassVar[str] = "MARLHFIter"
    _engine_class: ClassVar[type] = _EngineMARLHFIterTrainer
    iterative: ClassVar[bool] = True
