"""CoMLRL's ``comlrl.trainers.actor_critic.maac``: ``MAACConfig`` and ``MAACTrainer``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from engine.actor_critic.maac import MAACTrainer as _EngineMAACTrainer
from engine.comlrl._configs import MAACConfig
from engine.comlrl.trainers.actor_critic.ac_base import ActorCriticTrainerBase
from engine.comlrl.utils.model_loading import resolve_model_sources

__all__ = ["MAACConfig", "MAACTrainer"]


class MAACTrainer(ActorCriticTrainerBase):
    """CoMLRL's ``MAACTrainer`` over :class:`engine.actor_critic.MAACTrainer`: one centralised critic,
    ``critic_model`` or ``critics=[one]`` (required)."""

    default_config_cls: ClassVar[type] = MAACConfig
    algorithm_name: ClassVar[str] = "MAAC"
    _engine_class: ClassVar[type] = _EngineMAACTrainer
    shared_critic: ClassVar[bool] = True

    def _critic_sources(self, args: Any, critic_model: Any, critics: Sequence[Any] | None) -> list[Any] | None:
        if critics is None and critic_model is None:
            raise ValueError("Either critic_model or critics must be provided for MAAC.")
        sources, _ = resolve_model_sources(kind="critics", model=critic_model, models=critics, expected_count=1,
                                           expected_label="1 (MAAC's shared critic)", model_label="critic_model")
        return sources
