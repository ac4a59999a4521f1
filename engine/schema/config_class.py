"""Which config class an algorithm builds, and which run-config settings it reads, without building the
other algorithms' classes.

Each config class is a pydantic dataclass built from the catalog when its module is imported (tens of
milliseconds apiece); :mod:`engine.schema.algorithms` imports all of them. Checking one run config needs
one: :func:`config_class` imports only the module of the algorithm asked for, so ``cooplab submit`` of a
MAGRPO run never builds the preference or actor-critic classes. Torch-free.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from engine.schema.catalog import ALGORITHM_BASELINES, CATALOG
from engine.schema.run_config import TrainerSpec

if TYPE_CHECKING:
    from engine.schema.derive import ConfigModel

_PREFERENCE = "engine.schema.preference_configs"
CONFIG_CLASS_PATHS: dict[str, str] = {  # "module:name", imported on first use
    **dict.fromkeys(ALGORITHM_BASELINES, "engine.schema.configs:MAGRPOConfig"),
    "iac": "engine.schema.actor_critic_configs:IACConfig",
    "maac": "engine.schema.actor_critic_configs:MAACConfig",
    "madpo": f"{_PREFERENCE}:MADPOConfig",
    "centralized_magrpo": f"{_PREFERENCE}:CentralizedMAGRPOConfig",
    "marlhf": f"{_PREFERENCE}:MARLHFConfig",
    "madpo_iter": f"{_PREFERENCE}:MADPOIterConfig",
    "marlhf_iter": f"{_PREFERENCE}:MARLHFIterConfig",
}


def config_class(algorithm: str) -> type[ConfigModel]:
    """The config class of ``algorithm`` (``MAGRPOConfig`` for the MAGRPO family, ...), importing its
    module only; ``KeyError`` for an algorithm with none."""
    module, _, name = CONFIG_CLASS_PATHS[algorithm].partition(":")
    made: type[ConfigModel] = getattr(importlib.import_module(module), name)
    return made


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


__all__ = ["CONFIG_CLASS_PATHS", "config_class", "read_settings", "unused_settings"]
