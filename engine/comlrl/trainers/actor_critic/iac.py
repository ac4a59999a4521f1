"""CoMLRL's ``comlrl.trainers.actor_critic.iac``: ``IACConfig``, ``RolloutSample`` and ``IACTrainer``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from engine.actor_critic.iac import IACTrainer as _EngineIACTrainer
from engine.comlrl._configs import IACConfig
from engine.comlrl._rollouts import RolloutSample
from engine.comlrl.trainers.actor_critic.ac_base import ActorCriticTrainerBase
from engine.comlrl.utils.model_loading import resolve_model_sources

__all__ = ["IACConfig", "IACTrainer", "RolloutSample"]


class IACTrainer(ActorCriticTrainerBase):
    """CoMLRL's ``IACTrainer`` over :class:`engine.actor_critic.IACTrainer`: one critic per agent
    (``critics``/``critic_model``, required with ``use_separate_critic=True``) or a value head on each
    agent (``use_separate_critic=False``, no critics)."""

    default_config_cls: ClassVar[type] = IACConfig
    algorithm_name: ClassVar[str] = "IAC"
    _engine_class: ClassVar[type] = _EngineIACTrainer

    def _check_critic_arguments(self, args: Any, critic_model: Any, critics: Sequence[Any] | None) -> None:
        if not args.use_separate_critic and (critics is not None or critic_model is not None):
            raise ValueError("critics can only be provided when use_separate_critic=True.")

    def _critic_sources(self, args: Any, critic_model: Any, critics: Sequence[Any] | None) -> list[Any] | None:
        if not args.use_separate_critic:
            return None
        if critics is None and critic_model is None:
            raise ValueError("Either critic_model or critics must be provided when use_separate_critic=True.")
        sources, _ = resolve_model_sources(kind="critics", model=critic_model, models=critics,
                                           expected_count=args.num_agents, model_label="critic_model")
        return sources
