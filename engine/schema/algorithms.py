"""The algorithm table: for each ``trainer.algorithm``, its config class and its trainer class, and
which run-config settings it reads (from the catalog's ``reads``, as its config class).

Torch-free (trainer classes are named, not imported), so the dashboard can ask which run-config
settings an algorithm reads. Importing it builds every config class; checking one run config needs
only its own (:func:`engine.schema.config_class.config_class`, which the pre-flight path uses).
"""

from __future__ import annotations

import importlib

from engine.schema.actor_critic_configs import ActorCriticConfig
from engine.schema.catalog import ALGORITHM_BASELINES, CATALOG
from engine.schema.config_class import CONFIG_CLASS_PATHS, config_class, read_settings, unused_settings
from engine.schema.configs import MAGRPOConfig
from engine.schema.derive import ConfigModel
from engine.schema.preference_configs import MADPOConfig, MARLHFConfig

TrainerConfig = MAGRPOConfig | ActorCriticConfig | MADPOConfig | MARLHFConfig
"""Any algorithm's config (each config class derives from one of these four)."""
# The configs whose trainers read the MAGRPO-family sampler and credit settings (rollout_correction,
# tis_cap, credit_assignment): the MAGRPO family and MARLHF's RL stage; the others train without them.
POLICY_GRADIENT_CONFIGS = (MAGRPOConfig, MARLHFConfig)

CONFIG_CLASSES: dict[str, type[ConfigModel]] = {name: config_class(name) for name in CONFIG_CLASS_PATHS}
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


def trainer_class(algorithm: str) -> type:
    """The trainer class of ``algorithm`` (imports it, and torch)."""
    module, _, name = TRAINER_CLASSES[algorithm].partition(":")
    return getattr(importlib.import_module(module), name)


__all__ = ["CONFIG_CLASSES", "POLICY_GRADIENT_CONFIGS", "RUN_LEVEL", "TRAINER_CLASSES", "TrainerConfig",
           "read_settings", "trainer_class", "unused_settings"]
