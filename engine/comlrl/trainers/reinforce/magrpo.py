"""CoMLRL's ``comlrl.trainers.reinforce.magrpo``: ``MAGRPOConfig`` and ``MAGRPOTrainer``.

The config is CoopLab's (CoMLRL's fields, names and defaults first; CoopLab's deliberate defaults and
extensions are in docs/comlrl.md). The trainer takes CoMLRL's constructor, checks it in CoMLRL's order
with CoMLRL's messages and trains with :class:`engine.trainer.MAGRPOTrainer`
(:class:`engine.comlrl._wrap.CompatTrainer`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from engine.comlrl._configs import MAGRPOConfig
from engine.comlrl._wrap import (
    CoMLRLReward,
    CompatTrainer,
    check_devices,
    check_reward_func,
    check_tokenizers,
)
from engine.comlrl.utils.formatters import build_formatters
from engine.comlrl.utils.model_loading import infer_model_name, resolve_model_sources
from engine.trainer import MAGRPOTrainer as _EngineMAGRPOTrainer

__all__ = ["MAGRPOConfig", "MAGRPOTrainer"]


def reinforce_sources(args: Any, *, agent_model: Any, agents: Sequence[Any] | None, num_agents: int,
                      tokenizer: Any, formatters: Any, reward_func: Any, external_transition: Any,
                      algorithm: str) -> tuple[list[Any], str | None]:
    """CoMLRL's checks of a MAGRPO-family constructor, in its order, before any model loads; returns
    one model source per agent and CoMLRL's ``model_name``."""
    if agent_model is None and agents is None:
        raise ValueError("Either agent_model or agents must be provided.")
    if agents is None and agent_model is not None and not isinstance(agent_model, str):
        raise ValueError("agent_model should be a string to create homogeneous agents")
    build_formatters(formatters, num_agents, pass_none_external_prompts=False)
    check_reward_func(reward_func)
    count = len(agents) if agents is not None and agent_model is None else num_agents
    sources, model_name = resolve_model_sources(kind="agents", model=agent_model, models=agents,
                                                expected_count=count, expected_label=f"num_agents ({count})",
                                                model_label="agent_model")
    if not all(isinstance(source, str) for source in sources):
        model_name = infer_model_name(sources[0])
    check_tokenizers(tokenizer, sources, agents_given=agents is not None)
    if args.reference_kl_enabled:
        check_devices(args.reference_devices, count, "reference_devices")
    if args.num_turns > 1 and external_transition is None:
        raise ValueError(f"Multi-turn {algorithm} requires an external_transition.")
    return sources, model_name


class MAGRPOTrainer(CompatTrainer):
    """CoMLRL's ``MAGRPOTrainer(agent_model=None, agents=None, num_agents=2, tokenizer=None,
    model_config=None, train_dataset=None, eval_dataset=None, reward_func=None, reward_processor=None,
    formatters=None, external_transition=None, wandb_config=None, eval_logger=None,
    eval_aggregator=None, args=None)``; CoopLab's keyword-only extras (``sink``, ``agent_names``,
    ``eval_check``, ...) pass through to :class:`engine.trainer.MAGRPOTrainer`."""

    default_config_cls: ClassVar[type] = MAGRPOConfig
    algorithm_name: ClassVar[str] = "MAGRPO"
    _engine_class: ClassVar[type] = _EngineMAGRPOTrainer

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
        **cooplab_options: Any,
    ) -> None:
        args = args if args is not None else self.default_config_cls()
        sources, model_name = reinforce_sources(
            args, agent_model=agent_model, agents=agents, num_agents=num_agents, tokenizer=tokenizer,
            formatters=formatters, reward_func=reward_func, external_transition=external_transition,
            algorithm="MAGRPO")  # CoMLRL names MAGRPO for every preset
        engine = self._engine_class(
            agents=sources, tokenizer=tokenizer, model_config=model_config, train_dataset=train_dataset,
            eval_dataset=eval_dataset, reward_func=CoMLRLReward(reward_func, len(sources)),
            reward_processor=reward_processor, formatters=formatters, external_transition=external_transition,
            eval_logger=eval_logger, eval_aggregator=eval_aggregator, args=args,
            **cooplab_options)
        self._adopt(engine, reward_func=reward_func, reward_processor=reward_processor, train_dataset=train_dataset,
                    model_name=model_name, wandb_config=wandb_config, model_config=model_config, formatters=formatters)
