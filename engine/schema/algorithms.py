"""The algorithm table: for each ``trainer.algorithm``, its config class and its trainer class.

Torch-free (trainer classes are named, not imported), so the dashboard can ask which run-config
settings an algorithm reads.
"""

from __future__ import annotations

import importlib

from engine.schema.actor_critic_configs import IACConfig, MAACConfig
from engine.schema.catalog import ALGORITHM_BASELINES
from engine.schema.configs import MAGRPOConfig
from engine.schema.preference_configs import (
    CentralizedMAGRPOConfig,
    MADPOConfig,
    MADPOIterConfig,
    MARLHFConfig,
    MARLHFIterConfig,
)
from engine.schema.run_config import TrainerSpec

CONFIG_CLASSES: dict[str, type] = {**dict.fromkeys(ALGORITHM_BASELINES, MAGRPOConfig), "iac": IACConfig,
                                   "maac": MAACConfig, "madpo": MADPOConfig,
                                   "centralized_magrpo": CentralizedMAGRPOConfig, "marlhf": MARLHFConfig,
                                   "madpo_iter": MADPOIterConfig, "marlhf_iter": MARLHFIterConfig}
TRAINER_CLASSES: dict[str, str] = {  # "module:name", imported when a trainer is built
    **dict.fromkeys(ALGORITHM_BASELINES, "engine.trainer.trainer:MAGRPOTrainer"),
    "iac": "engine.actor_critic.iac:IACTrainer",
    "maac": "engine.actor_critic.maac:MAACTrainer",
    "madpo": "engine.preference.madpo:MADPOTrainer",
    "centralized_magrpo": "engine.preference.centralized_magrpo:CentralizedMAGRPOTrainer",
    "marlhf": "engine.preference.marlhf:MARLHFTrainer",
    "madpo_iter": "engine.preference.madpo_iter:MADPOIterTrainer",
    "marlhf_iter": "engine.preference.marlhf_iter:MARLHFIterTrainer",
}
# Run-config trainer settings that the build reads itself (no config class has them).
RUN_LEVEL = tuple(name for name in TrainerSpec.model_fields
                  if not any(name in cls.field_names() for cls in CONFIG_CLASSES.values()))
# Run-config trainer settings with a rule of their own for every algorithm (engine.schema.collaboration),
# so never "not used": a decentralized magrpo team is what collaboration_mode 'decentralized' says.
OWN_RULE = ("collaboration_mode",)


def unused_settings(algorithm: str) -> list[str]:
    """Run-config trainer settings that ``algorithm`` does not read (e.g. ``clip_epsilon`` for iac); a
    config class's ``compat_only`` fields are accepted from CoMLRL scripts but not read."""
    cls = CONFIG_CLASSES[algorithm]
    fields = [name for name in cls.field_names() if name not in getattr(cls, "compat_only", ())]
    return [name for name in TrainerSpec.model_fields
            if name not in fields and name not in RUN_LEVEL and name not in OWN_RULE]


def trainer_class(algorithm: str) -> type:
    """The trainer class of ``algorithm`` (imports it, and torch)."""
    module, _, name = TRAINER_CLASSES[algorithm].partition(":")
    return getattr(importlib.import_module(module), name)
