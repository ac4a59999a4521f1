"""CoMLRL's ``comlrl.trainers.preference.marlhf``: ``MARLHFConfig``, ``MARLHFTrainer`` and
``JointRewardModel``.

``MARLHFTrainer`` takes MADPO's constructor plus CoMLRL's ``metrics_callback``, ``critic_model`` and
``critics`` (read by an ``iac``/``maac`` RL stage). :class:`JointRewardModel` is CoMLRL's module (a
backbone and a reward head on the last real token, called with ids and a mask) for scripts that
build one; CoopLab's MARLHF fits its own (:class:`engine.preference.reward_model.JointRewardModel`,
which reads text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import nn

from engine.comlrl.trainers.preference.madpo import PreferenceTrainer
from engine.preference.marlhf import MARLHFTrainer as _EngineMARLHFTrainer
from engine.schema.preference_configs import MARLHFConfig

__all__ = ["JointRewardModel", "MARLHFConfig", "MARLHFTrainer"]

ACTOR_CRITIC_STAGES = ("iac", "maac")


class JointRewardModel(nn.Module):
    """A causal-LM backbone with a scalar reward head on each row's last non-pad token."""

    def __init__(self, backbone: nn.Module, freeze_backbone: bool = False) -> None:
        super().__init__()
        self.backbone = backbone
        model_config = getattr(backbone, "config", None)  # transformers': the name varies by architecture
        hidden = getattr(model_config, "hidden_size", None) or getattr(model_config, "n_embd", None) or \
            getattr(model_config, "d_model", None)
        if hidden is None:
            raise ValueError("Could not infer reward model hidden size.")
        self.reward_head = nn.Linear(int(hidden), 1)
        param = next(self.backbone.parameters())
        self.reward_head.to(device=param.device, dtype=param.dtype)
        if freeze_backbone:
            for p in self.backbone.parameters():
                p.requires_grad = False

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Scores (B,) of (B, L) ids; left or right padding, the last position the mask keeps."""
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                               use_cache=False).hidden_states[-1]
        positions = torch.arange(attention_mask.size(1), device=hidden.device).expand_as(attention_mask)
        last = positions.masked_fill(attention_mask == 0, 0).max(dim=1).values
        pooled = hidden[torch.arange(hidden.size(0), device=hidden.device), last]
        return self.reward_head(pooled).squeeze(-1)


class MARLHFTrainer(PreferenceTrainer):
    """CoMLRL's ``MARLHFTrainer`` over :class:`engine.preference.marlhf.MARLHFTrainer`."""

    default_config_cls: ClassVar[type] = MARLHFConfig
    algorithm_name: ClassVar[str] = "MARLHF"
    _engine_class: ClassVar[type] = _EngineMARLHFTrainer

    def __init__(self, *args: Any, metrics_callback: Any = None, critic_model: Any = None,
                 critics: Sequence[Any] | None = None, **kwargs: Any) -> None:
        self.__dict__["_critic_options"] = {"metrics_callback": metrics_callback, "critic_model": critic_model,
                                            "critics": critics}
        super().__init__(*args, **kwargs)

    def _engine_options(self, config: Any, options: dict[str, Any]) -> dict[str, Any]:
        """An actor-critic RL stage takes the critics and ``metrics_callback``; a MAGRPO-family stage
        has no critics (CoMLRL ignores them there too)."""
        if config.rl_algorithm in ACTOR_CRITIC_STAGES:
            options = {**options, **{k: v for k, v in self.__dict__.pop("_critic_options").items() if v is not None}}
        else:
            self.__dict__.pop("_critic_options", None)
        return options
