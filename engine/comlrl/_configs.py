"""CoMLRL's config rules that CoopLab's config classes do not have, as subclasses of them.

CoopLab's classes take CoMLRL's fields, names and defaults first; where CoMLRL refuses a value CoopLab
accepts only by accident, the ``engine.comlrl`` class refuses it as CoMLRL does. CoopLab's
deliberate extensions (``parallel_training="auto"``, K > 1 multi-turn actor-critic, ...) stay
accepted: docs/comlrl.md lists them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from engine.schema import actor_critic_configs, configs, preference_configs


def reference_devices_problem(enabled: bool, devices: list[str] | None, count: int) -> str | None:
    """Reference devices are one for every agent, or one per agent (CoMLRL's rule)."""
    if not enabled or devices is None:
        return None
    if len(devices) == 0:
        return "reference_devices must be a non-empty list or 'auto'."
    if len(devices) not in (1, count):
        return f"reference_devices length ({len(devices)}) must be 1 or {count}."
    return None


def mp_critic_problem(config: Any, *, separate_critic: bool) -> str | None:
    """``parallel_training='mp'`` with critics of their own names their devices (CoMLRL's rule)."""
    if config.parallel_training == "mp" and separate_critic and config.critic_devices is None:
        return "parallel_training='mp' requires explicit critic_devices when use_separate_critic=True."
    return None


class CoMLRLRules:
    """Mixin: CoMLRL's rules checked after CoopLab's (``__post_init__``)."""

    if TYPE_CHECKING:  # fields of every config class it is mixed into
        reference_kl_enabled: bool
        reference_devices: list[str] | None
        num_agents: int

    def __post_init__(self) -> None:
        super().__post_init__()  # type: ignore[misc]
        problems = [reference_devices_problem(self.reference_kl_enabled, self.reference_devices, self.num_agents)]
        if isinstance(self, actor_critic_configs.IACConfig):
            problems.append(mp_critic_problem(self, separate_critic=self.use_separate_critic))
        elif isinstance(self, actor_critic_configs.MAACConfig):  # its one critic is always a model of its own
            problems.append(mp_critic_problem(self, separate_critic=True))
        for problem in problems:
            if problem:
                raise ValueError(problem)


class MAGRPOConfig(CoMLRLRules, configs.MAGRPOConfig):
    __doc__ = configs.MAGRPOConfig.__doc__


class MAREINFORCEConfig(CoMLRLRules, configs.MAREINFORCEConfig):
    __doc__ = configs.MAREINFORCEConfig.__doc__


class MAReMaxConfig(CoMLRLRules, configs.MAReMaxConfig):
    __doc__ = configs.MAReMaxConfig.__doc__


class MARLOOConfig(CoMLRLRules, configs.MARLOOConfig):
    __doc__ = configs.MARLOOConfig.__doc__


class IACConfig(CoMLRLRules, actor_critic_configs.IACConfig):
    __doc__ = actor_critic_configs.IACConfig.__doc__


class MAACConfig(CoMLRLRules, actor_critic_configs.MAACConfig):
    __doc__ = actor_critic_configs.MAACConfig.__doc__


class CentralizedComparatorTie:
    """Mixin of the iterative preference configs: CoMLRL ties a centralized actor
    (``collaboration_mode="centralized"``) to a centralized comparator. Its config then reads
    ``comparator_generation_mode == "centralized"`` and refuses any actor index but 0.

    The comparator is the same in CoopLab: the team's one model writes every role, and so does its
    comparator. CoopLab's config class spells that ``"decentralized"`` (there is no second writer to
    pick); :func:`engine_config` hands CoopLab's trainer that spelling."""

    engine_config_cls: type
    if TYPE_CHECKING:  # of the config classes it is mixed into
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
        collaboration_mode: Literal["decentralized", "centralized"]
        comparator_centralized_agent_index: int

    def __post_init__(self) -> None:
        central = self.collaboration_mode == "centralized"
        if central:
            if self.comparator_centralized_agent_index != 0:
                raise ValueError("Centralized collaboration has only actor index 0.")
            object.__setattr__(self, "comparator_generation_mode", "decentralized")  # CoopLab's spelling
        super().__post_init__()  # type: ignore[misc]
        if central:
            object.__setattr__(self, "comparator_generation_mode", "centralized")  # CoMLRL's


def engine_config(config: Any) -> Any:
    """The config CoopLab's trainer reads: ``config`` itself, or for a centralized actor's iterative
    config (:class:`CentralizedComparatorTie`) a copy of CoopLab's class with CoopLab's spelling of
    the comparator."""
    if not isinstance(config, CentralizedComparatorTie) or config.collaboration_mode != "centralized":
        return config
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    return config.engine_config_cls(**{**values, "comparator_generation_mode": "decentralized"})


class MADPOIterConfig(CentralizedComparatorTie, preference_configs.MADPOIterConfig):
    __doc__ = preference_configs.MADPOIterConfig.__doc__
    engine_config_cls = preference_configs.MADPOIterConfig


class MARLHFIterConfig(CentralizedComparatorTie, preference_configs.MARLHFIterConfig):
    __doc__ = preference_configs.MARLHFIterConfig.__doc__
    engine_config_cls = preference_configs.MARLHFIterConfig
