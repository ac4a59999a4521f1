"""CoMLRL's ``comlrl.trainers.reinforce.centralized_magrpo``: one joint actor writes every role."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from engine.comlrl._wrap import CoMLRLReward, CompatTrainer, check_reward_func
from engine.comlrl.utils.model_loading import infer_model_name
from engine.preference.centralized_magrpo import CentralizedMAGRPOTrainer as _EngineCentralizedMAGRPOTrainer
from engine.schema.preference_configs import CentralizedMAGRPOConfig as _EngineCentralizedMAGRPOConfig

__all__ = ["CentralizedMAGRPOConfig", "CentralizedMAGRPOTrainer"]


class CentralizedMAGRPOConfig(_EngineCentralizedMAGRPOConfig):
    """CoopLab's ``CentralizedMAGRPOConfig`` with CoMLRL's messages for its two rules."""

    def __post_init__(self) -> None:
        if self.collaboration_mode != "centralized":
            raise ValueError("CentralizedMAGRPOConfig requires centralized collaboration "
                             "(collaboration_mode='centralized').")
        if self.num_turns != 1:
            raise ValueError("Centralized MAGRPO currently supports num_turns=1 only.")
        super().__post_init__()


def check_adapter(adapter: Any, name: str) -> None:
    """The centralized protocol's two methods (CoMLRL's check)."""
    for method in ("build_prompt", "parse_completion"):
        if not callable(getattr(adapter, method, None)):
            raise TypeError(f"{name}.{method} must be callable.")


class CentralizedMAGRPOTrainer(CompatTrainer):
    """CoMLRL's ``CentralizedMAGRPOTrainer(*, centralized_adapter, num_agents=2, agents=None,
    tokenizer=None, reward_func=None, formatters=None, args=None, **kwargs)`` over
    :class:`engine.preference.centralized_magrpo.CentralizedMAGRPOTrainer`: ``agents`` is the one joint
    model, ``num_agents`` the number of roles (``trainer.num_agents`` is 1, the actor models)."""

    default_config_cls: ClassVar[type] = CentralizedMAGRPOConfig
    algorithm_name: ClassVar[str] = "MAGRPO"

    def __init__(self, *, centralized_adapter: Any, num_agents: int = 2, agents: Sequence[Any] | None = None,
                 tokenizer: Any = None, reward_func: Callable | None = None, formatters: Any = None,
                 args: Any = None, agent_model: Any = None, train_dataset: Any = None, **kwargs: Any) -> None:
        config = args if args is not None else self.default_config_cls()
        if not isinstance(config, _EngineCentralizedMAGRPOConfig) or config.collaboration_mode != "centralized":
            raise ValueError("CentralizedMAGRPOTrainer requires centralized configuration.")
        if config.num_turns != 1:
            raise ValueError("Centralized MAGRPO currently supports num_turns=1 only.")
        if num_agents != config.num_agents:
            raise ValueError("num_agents must match args.num_agents (the role count).")
        if agents is not None and len(agents) != 1:
            raise ValueError("Centralized collaboration requires exactly one actor model.")
        if isinstance(tokenizer, list | tuple) and len(tokenizer) != 1:
            raise ValueError("Centralized collaboration requires one actor tokenizer.")
        check_reward_func(reward_func)
        check_adapter(centralized_adapter, "centralized_adapter")
        wandb_config = kwargs.pop("wandb_config", None)  # opened by the compatibility trainer
        engine = _EngineCentralizedMAGRPOTrainer(
            agent_model=agent_model, agents=agents, num_agents=num_agents, tokenizer=tokenizer,
            train_dataset=train_dataset, reward_func=CoMLRLReward(reward_func, num_agents), formatters=formatters,
            args=config, centralized_adapter=centralized_adapter, **kwargs)
        self._adopt(engine, reward_func=reward_func, reward_processor=kwargs.get("reward_processor"),
                    train_dataset=train_dataset, model_name=infer_model_name(agents[0] if agents else agent_model),
                    wandb_config=wandb_config, model_config=kwargs.get("model_config"),
                    formatters=formatters)
