"""CoMLRL's ``comlrl.trainers.preference.madpo``: ``MADPOConfig`` and ``MADPOTrainer``.

The preference trainers take MAGRPO's constructor plus the keyword ``centralized_comparator_adapter``:
CoMLRL's one adapter for a model that writes every role, both the centralized actor
(``collaboration_mode="centralized"``, CoopLab's ``centralized_adapter``) and, in the iterative
trainers, the centralized comparator (``comparator_generation_mode="centralized"``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from engine.comlrl._configs import engine_config
from engine.comlrl._wrap import CoMLRLReward, CompatTrainer, check_reward_func
from engine.comlrl.trainers.reinforce.centralized_magrpo import check_adapter
from engine.comlrl.trainers.reinforce.magrpo import reinforce_sources
from engine.preference.madpo import MADPOTrainer as _EngineMADPOTrainer
from engine.preference.pairs import PreferencePair
from engine.schema.preference_configs import MADPOConfig

__all__ = ["MADPOConfig", "MADPOTrainer", "PreferencePair"]


class PreferenceTrainer(CompatTrainer):
    """Base of the ``engine.comlrl`` preference trainers (see the module docstring)."""

    default_config_cls: ClassVar[type]
    _engine_class: ClassVar[type]
    iterative: ClassVar[bool] = False

    def __init__(
        self,
        agent_model: Any = None,
        agents: Sequence[Any] | None = None,
        num_agents: int = 2,
        tokenizer: Any = None,
        model_config: dict[str, Any] | None = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        reward_func: Callable | None = None,
        reward_processor: Callable[[float], float] | None = None,
        formatters: Any = None,
        external_transition: Callable | None = None,
        wandb_config: dict[str, Any] | None = None,
        eval_logger: Callable | None = None,
        eval_aggregator: Callable | None = None,
        args: Any = None,
        *,
        centralized_comparator_adapter: Any = None,
        **cooplab_options: Any,
    ) -> None:
        config = args if args is not None else self.default_config_cls()
        adapter = centralized_comparator_adapter
        if adapter is not None:
            check_adapter(adapter, "centralized_comparator_adapter")
        centralized = config.collaboration_mode == "centralized"
        actor_count = num_agents
        if centralized:
            if agents is not None and len(agents) != 1:
                raise ValueError("Centralized collaboration requires exactly one actor model.")
            if isinstance(tokenizer, list | tuple) and len(tokenizer) != 1:
                raise ValueError("Centralized collaboration requires one actor tokenizer.")
            check_reward_func(reward_func)
            if num_agents != config.num_agents:
                raise ValueError("num_agents must match args.num_agents (the role count).")
            actor_count = 1
        sources, model_name = reinforce_sources(
            config, agent_model=agent_model, agents=agents, num_agents=actor_count, tokenizer=tokenizer,
            formatters=None if centralized else formatters, reward_func=reward_func,
            external_transition=external_transition, algorithm="MAGRPO")
        if centralized:
            cooplab_options["centralized_adapter"] = adapter
            cooplab_options.setdefault("num_agents", num_agents)
        if self.iterative and adapter is not None and not centralized \
                and config.comparator_generation_mode == "centralized":
            cooplab_options["centralized_comparator_adapter"] = adapter
        engine = self._engine_class(
            agents=sources if not centralized else [sources[0]], tokenizer=tokenizer, model_config=model_config,
            train_dataset=train_dataset, eval_dataset=eval_dataset,
            reward_func=CoMLRLReward(reward_func, num_agents), reward_processor=reward_processor,
            formatters=formatters, external_transition=external_transition,
            eval_logger=eval_logger, eval_aggregator=eval_aggregator, args=engine_config(config),
            **self._engine_options(config, cooplab_options))
        self._adopt(engine, reward_func=reward_func, reward_processor=reward_processor, train_dataset=train_dataset,
                    model_name=model_name, wandb_config=wandb_config, model_config=model_config, formatters=formatters)
        if engine.args is not config:  # CoMLRL's spelling for the user, CoopLab's for its trainer
            vars(self)["args"] = config

    def _engine_options(self, config: Any, options: dict[str, Any]) -> dict[str, Any]:
        """The CoopLab trainer's keyword options (subclasses add their own)."""
        return options


class MADPOTrainer(PreferenceTrainer):
    """CoMLRL's ``MADPOTrainer`` over :class:`engine.preference.madpo.MADPOTrainer`."""

    default_config_cls: ClassVar[type] = MADPOConfig
    algorithm_name: ClassVar[str] = "MADPO"
    _engine_class: ClassVar[type] = _EngineMADPOTrainer
