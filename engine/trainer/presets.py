"""CoMLRL's named presets of MAGRPO: the same trainer with a fixed group baseline
(``advantage_mode``): MAREINFORCE (none), MAReMax (the group maximum), MARLOO (leave-one-out)."""

from __future__ import annotations

from engine.schema.configs import MAGRPOConfig, MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig
from engine.trainer.magrpo import MAGRPOTrainer


class _Preset(MAGRPOTrainer):
    config_class: type[MAGRPOConfig] = MAGRPOConfig

    def __init__(self, *args, **kwargs) -> None:
        config = kwargs.get("args")
        if config is not None and config.advantage_mode != self.config_class().advantage_mode:
            raise ValueError(
                f"advantage_mode: {type(self).__name__} uses {self.config_class().advantage_mode!r}; "
                f"pass a {self.config_class.__name__} (or use MAGRPOTrainer with advantage_mode={config.advantage_mode!r})"
            )
        super().__init__(*args, **kwargs)

    def _default_config(self) -> MAGRPOConfig:
        return self.config_class()


class MAREINFORCETrainer(_Preset):
    """No baseline: advantages are the returns (``advantage_mode="raw"``)."""

    config_class = MAREINFORCEConfig


class MAReMaxTrainer(_Preset):
    """The group maximum as baseline (``advantage_mode="max"``)."""

    config_class = MAReMaxConfig


class MARLOOTrainer(_Preset):
    """The leave-one-out mean as baseline (``advantage_mode="rloo"``)."""

    config_class = MARLOOConfig
