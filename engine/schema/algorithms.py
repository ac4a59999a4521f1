"""The algorithm table: for each ``trainer.algorithm``, its config class and its trainer class, and
which run-config settings it reads (from the catalog's ``reads``, as its config class).

Torch-free (trainer classes are named, not imported), so the dashboard can ask which run-config
settings an algorithm reads.
"""

from __future__ import annotations

import importlib

from engine.schema.actor_critic_configs import ActorCriticConfig, IACConfig, MAACConfig
from engine.schema.catalog import ALGORITHM_BASELINES, CATALOG
from engine.schema.configs import MAGRPOConfig
from engine.schema.derive import ConfigModel
from engine.schema.preference_configs import (
    CentralizedMAGRPOConfig,
    MADPOConfig,
    MADPOIterConfig,
    MARLHFConfig,
    MARLHFIterConfig,
)
from engine.schema.run_config import TrainerSpec

TrainerConfig = MAGRPOConfig | ActorCriticConfig | MADPOConfig | MARLHFConfig
"""Any algorithm's config (each config class derives from one of these four)."""
# The configs whose trainers read the MAGRPO-family sampler and credit settings (rollout_correction,
# tis_cap, credit_assignment): the MAGRPO family and MARLHF's RL stage; the others train without them.
POLICY_GRADIENT_CONFIGS = (MAGRPOConfig, MARLHFConfig)

CONFIG_CLASSES: dict[str, type[ConfigModel]] = {**dict.fromkeys(ALGORITHM_BASELINES, MAGRPOConfig), "iac": IACConfig,
                                   "maac": MAACConfig, "madpo": MADPOConfig,
                                   "centralized_magrpo": CentralizedMAGRPOConfig, "marlhf": MARLHFConfig,
                                   "madpo_iter": MADPOIterConfig, "marlhf_iter": MARLHFIterConfig}
TRAINER_CLASSES: dict[str, str] = {  # "module:name", imported when a trainer is built
    **dict.fromkeys(ALGORITHM_BASELINES, "engine.trainer.magrpo:MAGRPOTrainer"),
    "iac": "engine.actor_critic.iac:IACTrainer",
    "maac": "engine.actor_critic.maac:MAACTrainer",
    "madpo": "engine.preference.madpo:MADPOTrainer",
    "centralized_magrpo": "engine.preference.centralized_magrpo:CentralizedMAGRPOTrainer",
    "marlhf": "engine.preference.marlhf:MARLHFTrainer",
    "madpo_iter": "engine.preference.madpo_iter:MADPOIterTrainer",
    "marlhf_iter": "engine.preference.marlhf_iter:MARLHFIterTrainer",
}
# Run-config trainer settings that the build reads itself for every algorithm and no config class has
# (the catalog's run_config "build" with no readers), and the actor-critic section.
RUN_LEVEL = (*(name for name, s in CATALOG.items() if s.run_config == "build" and not s.reads),
             "actor_critic")


def unused_settings(algorithm: str) -> list[str]:
    """Run-config trainer settings that ``algorithm`` does not read (e.g. ``clip_epsilon`` for iac), in the
    run config's order: the catalog's ``run_config="trainer"`` settings whose ``reads`` leave it out (a
    config class's ``compat_only`` fields are accepted from CoMLRL scripts but not read). A ``"build"``
    setting is never unused: the build reads it for every algorithm (``collaboration_mode`` decides
    whether the team is one model, engine.schema.collaboration)."""
    return [name for name in TrainerSpec.model_fields if name in CATALOG
            and CATALOG[name].run_config == "trainer" and algorithm not in CATALOG[name].reads]


def read_settings(algorithm: str) -> list[str]:
    """Run-config trainer settings that ``algorithm``'s config class reads, copied to it by name."""
    return [name for name in TrainerSpec.model_fields if name in CATALOG and algorithm in CATALOG[name].reads]


def trainer_class(algorithm: str) -> type:
    """The trainer class of ``algorithm`` (imports it, and torch)."""
    module, _, name = TRAINER_CLASSES[algorithm].partition(":")
    return getattr(importlib.import_module(module), name)
